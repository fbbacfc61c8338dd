"""A manifest path that is not a regular file is refused in one line, never waited on (issue #24,
finding 8: `reversi manifest check` of a FIFO hung, waiting for a writer that never came)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
DEADLINE_S = 30.0


def run(cwd: Path, command: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command, killed (and the test failed) if it has not finished by the deadline."""
    try:
        return subprocess.run([str(BIN / command), *args], cwd=cwd, capture_output=True, text=True,
                              timeout=DEADLINE_S, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} {' '.join(args)} was still waiting after {DEADLINE_S:g} s")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    os.mkfifo(path)
    return path


def test_manifest_check_refuses_a_fifo_at_once_in_one_line(tmp_path: Path, fifo: Path) -> None:
    done = run(tmp_path, "reversi", "manifest", "check", str(fifo))
    said = f"{fifo}: cannot read: it is a FIFO, not a regular file\n"
    assert (done.returncode, done.stdout, done.stderr) == (1, said, "")


def test_a_directory_and_a_device_are_refused_as_what_they_are(tmp_path: Path) -> None:
    done = run(tmp_path, "reversi", "manifest", "check", str(tmp_path), "/dev/zero", "--json")
    assert done.returncode == 1
    assert [p["message"] for p in json.loads(done.stdout)["problems"]] == [
        "cannot read: it is a directory, not a regular file",
        "cannot read: it is a character device, not a regular file"]


def test_every_part_that_reads_manifests_refuses_a_fifo_at_start(tmp_path: Path, fifo: Path) -> None:
    said = f"{fifo}: cannot read: it is a FIFO, not a regular file"
    plan = run(tmp_path, "reversi", "plan", "run_x", "-m", str(fifo))
    assert (plan.returncode, plan.stderr) == (1, f"reversi: error: invalid manifest: {said}\n")
    server = run(tmp_path, "reversi-server", "--port", "0", "--db", f"sqlite:///{tmp_path}/r.db",
                 env={"REVERSI_MANIFEST": str(fifo)})
    assert server.returncode == 1 and f"invalid manifest:\n{said}\n" in server.stderr
    listing = run(tmp_path, "reversi", "manifest", "draft", "--tools-list", str(fifo))
    assert (listing.returncode, listing.stderr) == (1, f"reversi: error: {fifo}: cannot read: it is a FIFO, not a "
                                                       "regular file\n")

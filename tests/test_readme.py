"""The README's walkthrough works as written: its manifest, its SDK snippet and its CLI commands."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def blocks(language: str) -> list[str]:
    return [body for lang, body in re.findall(r"```(\w+)\n(.*?)```", README.read_text(), re.S) if lang == language]


def bash_commands() -> list[list[str]]:
    """The `reversi ...` commands of step 4, with line continuations joined and comments dropped."""
    [step4] = [b for b in blocks("bash") if "reversi rollback" in b]
    joined = step4.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("REVERSI_"):
            monkeypatch.delenv(name)
    return tmp_path


def test_the_walkthrough_records_plans_settles_and_rolls_back(folder: Path) -> None:
    [manifest] = blocks("yaml")
    (folder / "tools.yaml").write_text(manifest)
    [undo] = blocks("sh")
    (folder / "undo.sh").write_text(undo)
    (folder / "undo.sh").chmod(0o755)
    [snippet] = blocks("python")
    recorded = subprocess.run([sys.executable, "-c", snippet], cwd=folder, capture_output=True, text=True, check=True)
    run_id = recorded.stdout.strip()
    bin_dir = Path(sys.executable).parent
    exits = []
    for argv in bash_commands():
        argv = [a.replace("RUN", run_id) for a in argv]
        p = subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=folder, capture_output=True, text=True)
        assert "Traceback" not in p.stderr
        exits.append(p.returncode)
    assert exits == [0, 2, 0, 0], "runs; plan (unknown outcome: 2); resolve; rollback (complete: 0)"
    undone = [json.loads(line) for line in (folder / "undo.log").read_text().splitlines() if line.strip()]
    assert [(c["step"], c["args"]["charge_id"]) for c in undone] == [(1, "ch_2"), (0, "ch_1")]


def test_the_shipped_manifest_lines_run_as_written(tmp_path: Path) -> None:
    """Step 6's `reversi manifest coverage` line, by bash from the repository (npx finds the pinned
    server-memory in node_modules), with the store and the server's file kept in `tmp_path`."""
    [block] = [b for b in blocks("bash") if "reversi manifest coverage" in b]
    lines = block.replace("\\\n", " ").splitlines()
    [coverage] = [line.split("#")[0] for line in lines if line.startswith("reversi manifest coverage")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "REVERSI_DB": f"sqlite:///{tmp_path}/r.db", "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    done = subprocess.run(["bash", "-c", coverage], cwd=README.parent, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("create_entities  undo: delete_entities (inverse)")
    assert done.stdout.splitlines()[-1] == "6 write tools, 0 drilled"

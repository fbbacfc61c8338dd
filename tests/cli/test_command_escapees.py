"""A command whose child left its process group (`setsid`) and kept its output open is stopped at the
timeout with that child, and the rollback ends cleanly (issue #24, finding 8: the child survived,
and the CLI printed `Event loop is closed` with a traceback as it exited)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.cli.conftest import UNDO, record_charge, reversi_cli
from tests.cli.test_commands import VERIFIED, alive, script

WAIT_S = 30.0
# The command starts a child in a session of its own that holds its stdout and stderr, and exits.
ESCAPES = '#!/bin/sh\nsetsid sleep 600 &\necho $! > "$0.child"\nexit 0\n'


@pytest.fixture
def escapees(here: Path) -> Iterator[list[Path]]:
    """Where the scripts write their child's pid; each child still running at the end is killed."""
    found: list[Path] = []
    yield found
    for path in found:
        if path.exists() and alive(pid := int(path.read_text())):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    deadline = time.monotonic() + WAIT_S
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("flag", ["--compensator-cmd", "--verify-cmd", "--reader-cmd"])
def test_a_child_that_left_the_group_holding_stdout_is_stopped_and_nothing_is_printed_but_the_report(
        here: Path, escapees: list[Path], flag: str) -> None:
    if flag == "--reader-cmd":
        (here / "tools.yaml").write_text(VERIFIED)
    run_id = record_charge(here)
    command = script(here, "escapes.sh", ESCAPES)
    escapees.append(here / "escapes.sh.child")
    commands = {"--compensator-cmd": UNDO, flag: str(command)}
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", *[w for pair in commands.items() for w in pair],
                    "--cmd-timeout", "1", "--json", cwd=here)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "Event loop is closed" not in p.stderr, p.stderr
    report = json.loads(p.stdout)
    assert "escapes.sh timed out after 1 s" in json.dumps(report)
    assert gone(int((here / "escapes.sh.child").read_text())), "the child that left the group outlived the rollback"


def test_the_rollback_ends_within_the_deadline_even_so(here: Path, escapees: list[Path]) -> None:
    run_id = record_charge(here)
    command = script(here, "escapes.sh", ESCAPES)
    escapees.append(here / "escapes.sh.child")
    try:
        p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", str(command), "--cmd-timeout",
                        "1", cwd=here)
    except subprocess.TimeoutExpired:
        pytest.fail("the rollback waited on the child that holds the command's output")
    assert p.returncode == 2 and p.stderr == "", p.stderr
    assert "timed out after 1 s" in p.stdout

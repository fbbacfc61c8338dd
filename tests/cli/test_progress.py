"""`reversi rollback` on a terminal: progress on stderr only, and Ctrl-C that says what it left."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.conftest import UNDO, reversi_cli

import reversi

SLOW = "import json, sys, time; json.load(sys.stdin); time.sleep(0.5); print(json.dumps({'undone': True}))"


def record_charges(here: Path, count: int) -> str:
    with reversi.open(manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        for i in range(count):
            run.begin("stripe.create_charge", {"amount": i}).succeeded({"id": f"ch_{i}"})
        return str(run.id)


def read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal's other end is closed: the program ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_stderr_when_stdout_goes_to_a_file(here: Path) -> None:
    run_id = record_charges(here, 2)
    controller, terminal = pty.openpty()
    with (here / "report.txt").open("w") as report:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("reversi")), "rollback", run_id, "-m",
                                 "tools.yaml", "--compensator-cmd", f"{sys.executable} -c \"{SLOW}\""],
                                stdout=report, stderr=terminal, cwd=here)
    os.close(terminal)
    shown = read_all(controller)
    assert proc.wait(timeout=60) == 0
    assert f"rolling back {run_id}" in shown and "/2" in shown and "step 1" in shown, shown
    text = (here / "report.txt").read_text()
    assert text.endswith("rollback complete\n") and "\x1b" not in text and "rolling back" not in text


def test_no_progress_when_stderr_is_not_a_terminal(here: Path) -> None:
    run_id = record_charges(here, 1)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(Path(sys.executable).with_name("reversi")), "rollback", run_id, "-m",
                             "tools.yaml", "--compensator-cmd", f"{sys.executable} -c \"{SLOW}\""],
                            stdout=terminal, stderr=subprocess.PIPE, cwd=here)
    os.close(terminal)
    shown = read_all(controller)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b""
    assert "rolling back" not in shown and "rollback complete" in shown


def test_ctrl_c_during_a_rollback_says_which_step_it_left_compensating(here: Path) -> None:
    run_id = record_charges(here, 2)
    started = here / "started"
    hangs = here / "hangs.sh"
    hangs.write_text(f"#!/bin/sh\ntouch {started}\nsleep 30\n")
    hangs.chmod(0o755)
    proc = subprocess.Popen([str(Path(sys.executable).with_name("reversi")), "rollback", run_id, "-m",
                             "tools.yaml", "--compensator-cmd", str(hangs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=here)
    deadline = time.monotonic() + 30
    while not started.exists():  # the compensator of the newest step is running
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == ("reversi: error: rollback interrupted: step 1 was left compensating; run the rollback again "
                   "to finish it\n")
    again = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", UNDO, "--json", cwd=here)
    assert json.loads(again.stdout)["compensated"] == [1, 0]

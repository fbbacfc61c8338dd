"""The commands a rollback runs (`--compensator-cmd`, `--reader-cmd`): stopped with everything they
started when they take too long, and failed when they write too much."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.cli.conftest import MANIFEST, UNDO, record_charge, reversi_cli

# A command that does its work in a child of its own and waits for it, as `sh -c 'sleep 20'` does.
SPAWNS_SLEEP = '#!/bin/sh\nsleep 20 &\necho $! > "$0.child"\nwait\n'
# Well under the child's 20 s, and far over what the command takes on a loaded machine.
WAITED_S = 15

# The folder's manifest, with a read-back declared for the charge.
VERIFIED = MANIFEST.replace("  email.send:", """    verification:
      tool: stripe.get_charge
      args: {id: "$result.id"}
      expect: {refunded: true}
  email.send:""")


def alive(pid: int) -> bool:
    """Whether the process is there and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def script(here: Path, name: str, text: str) -> Path:
    path = here / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_compensator_whose_child_hangs_is_stopped_with_its_child_at_the_timeout(here: Path) -> None:
    run_id = record_charge(here)
    undo = script(here, "undo.sh", SPAWNS_SLEEP)
    started = time.monotonic()
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", str(undo), "--cmd-timeout", "1",
                    "--json", cwd=here)
    took = time.monotonic() - started
    assert p.returncode == 2, p.stderr
    assert "timed out after 1 s" in json.loads(p.stdout)["failed"][0]["error"]
    assert took < WAITED_S, f"the rollback took {took:.1f} s: it waited for the command's child"
    assert not alive(int((here / "undo.sh.child").read_text()))


def test_a_reader_whose_child_hangs_is_stopped_with_its_child_at_the_timeout(here: Path) -> None:
    (here / "tools.yaml").write_text(VERIFIED)
    run_id = record_charge(here)
    read = script(here, "read.sh", SPAWNS_SLEEP)
    started = time.monotonic()
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", UNDO,
                    "--reader-cmd", str(read), "--cmd-timeout", "1", "--json", cwd=here)
    took = time.monotonic() - started
    assert p.returncode == 2, p.stderr
    assert took < WAITED_S, f"the rollback took {took:.1f} s: it waited for the reader's child"
    assert not alive(int((here / "read.sh.child").read_text()))


def test_a_compensator_that_writes_over_a_mebibyte_fails_its_attempt_saying_so(here: Path) -> None:
    run_id = record_charge(here)
    for stream in ("stdout", "stderr"):
        flood = f"import sys; sys.{stream}.write('x' * (2 << 20))"
        p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", f"{sys.executable} -c \"{flood}\"",
                        "--json", cwd=here)
        assert p.returncode == 2, p.stderr
        [failure] = json.loads(p.stdout)["failed"]
        assert failure["error"].endswith(f": output over 1 MiB on {stream}")


def test_a_long_last_line_of_stderr_is_cut_short_in_the_report_and_the_journal(here: Path) -> None:
    run_id = record_charge(here)
    fails = "import sys; sys.stderr.write('e' * 500_000); sys.exit(1)"
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", f"{sys.executable} -c \"{fails}\"",
                    "--json", cwd=here)
    [failure] = json.loads(p.stdout)["failed"]
    assert failure["error"] == "e" * 1000 + "…"
    events = [json.loads(line) for line in reversi_cli("export", "--run", run_id, cwd=here).stdout.splitlines()]
    [event] = [e for e in events if e["type"] == "compensation_failed"]
    assert event["data"]["error"] == "e" * 1000 + "…"


def test_an_unverified_undo_says_to_pass_a_reader_in_the_clis_words(here: Path) -> None:
    (here / "tools.yaml").write_text(VERIFIED)
    run_id = record_charge(here)
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", UNDO, cwd=here)
    assert p.returncode == 2
    assert "undone but not verified (declared read-back not run; pass --reader-cmd): 0" in p.stdout.splitlines()


def test_a_command_cancelled_while_it_is_being_started_is_stopped_with_its_children(here: Path) -> None:
    """Ctrl-C (a cancellation) can land while asyncio is still connecting the new process's pipes: the
    process runs already, and must not outlive the cancellation (nor hold it up)."""
    import asyncio

    from reversi.engine.commands import run_command

    spawner = script(here, "spawns.sh", SPAWNS_SLEEP)

    async def cancel_at_start() -> float:
        task = asyncio.ensure_future(run_command([str(spawner)], {}, 30))
        await asyncio.sleep(0)  # the fork has happened; the pipes are not connected yet
        task.cancel()
        started = time.monotonic()
        done, _ = await asyncio.wait([task], timeout=10)
        assert done, "the cancelled command held its caller up"
        return time.monotonic() - started

    took = asyncio.run(cancel_at_start())
    deadline = time.monotonic() + 5
    while not (here / "spawns.sh.child").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert took < WAITED_S, f"cancelling took {took:.1f} s"
    child = here / "spawns.sh.child"
    assert not child.exists() or not alive(int(child.read_text() or 0))

"""The campaign's targets that run one process per fault: the SDK's recording (`sdk_child.py`, `run.call`)
and the CLI's rollback (`reversi rollback` with the witness as compensator and reader).

After the kill, the operator's recovery runs here, in-process, through the SDK: settle the unresolved
steps by asking the witness (`run.reconcile`), then roll back until nothing is left to do.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.reliability.recovery import KILL_QUIET_MS, MAX_ROLLBACKS, NOTE, OPERATOR, settled, settlement
from tests.reliability.witness_client import WitnessError
from tests.reliability.workload import Kill, Workload

import reversi

if TYPE_CHECKING:
    from tests.reliability.campaign import Cell

WAIT_S = 60.0
HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
FAST_RETRY = reversi.Retry(attempts=3, base_ms=1, max_ms=4)


def killed_at(cell: Cell, proc: subprocess.Popen[Any], kill: Kill | None, label: str) -> tuple[bool, int]:
    """Arm the witness to kill `proc` (if `kill`), wait for it to end either way; (killed, exit code)."""
    if kill is not None:
        cell.witness.arm(proc.pid, kill.after, kill.delay_ms, label)
    try:
        code = proc.wait(WAIT_S)
    finally:
        killed = cell.witness.disarm() if kill is not None else False
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT_S)
    cell.witness.settle(KILL_QUIET_MS if killed else 0)
    return killed, code


def reconcile(cell: Cell, run: reversi.Run) -> None:
    """Settle every unresolved step as the witness says it went."""

    def probe(state: Any) -> reversi.Outcome:
        status, result = settlement(cell.directory, state.args.get("op"))
        if status == "succeeded":
            return reversi.Outcome(status, result, NOTE)
        return reversi.Outcome(status, note=NOTE)

    run.reconcile(probe, actor=OPERATOR)


def record(cell: Cell, w: Workload) -> reversi.Run:
    """Record the workload in this process, the witness's forward calls as the effects."""
    run = cell.ledger.start_run(w.run_id, actor="campaign")
    for call in w.calls:

        def effect(tool: str = call.tool, timeout: bool = call.timeout, **args: Any) -> Any:
            result = cell.witness.forward(tool, args)
            if timeout:
                raise TimeoutError(f"{tool} did not answer in time")
            return result

        with contextlib.suppress(TimeoutError, WitnessError):  # journaled uncertain, failed
            run.call(call.tool, call.args, effect, depends_on=call.depends_on)
    return run


def tools_of(run: reversi.Run) -> dict[int, str]:
    return {s.index: s.tool for s in run.steps()}


def finish(cell: Cell, run: reversi.Run) -> None:
    """The operator's rounds in this process: settle what is unknown, roll back, until nothing is left.

    Raises:
        AssertionError: still not settled after MAX_ROLLBACKS rounds.
    """
    for _ in range(MAX_ROLLBACKS):
        reconcile(cell, run)
        report = run.rollback(compensate=cell.witness.compensate, verifier=cell.witness.read, retry=FAST_RETRY,
                              approve_compensations=True, actor=OPERATOR).to_dict()
        cell.report("sdk rollback", report)
        if settled(report, tools_of(run)):
            return
    raise AssertionError(f"{run.id}: not settled after {MAX_ROLLBACKS} rollbacks")


class SdkDriver:
    """Kill the recording process; the operator reconciles and rolls back in-process."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell

    def run(self, w: Workload) -> None:
        cell = self.cell
        config = {
            "db": cell.store_url, "manifest": str(cell.manifest), "run_id": w.run_id, "socket": cell.socket,
            "acks": str(cell.directory / "acks.jsonl"),
            "calls": [{"tool": c.tool, "args": c.args, "depends_on": list(c.depends_on), "timeout": c.timeout}
                      for c in w.calls],
        }
        child = subprocess.Popen([sys.executable, str(HERE / "sdk_child.py"), json.dumps(config)])
        killed_at(cell, child, w.kills[0], "run.call")
        try:
            run = cell.ledger.get_run(w.run_id)
        except reversi.errors.NotFound:
            return  # killed before the run was opened: nothing happened
        finish(cell, run)

    def close(self) -> None:
        pass


class CliDriver:
    """Record in-process, then kill `reversi rollback` (once, or again in its first re-run), and re-run it;
    what its retries left failing is finished in-process."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell

    def rollback(self, w: Workload, kill: Kill | None) -> dict[str, Any] | None:
        cell = self.cell
        argv = [str(BIN / "reversi"), "--db", cell.store_url, "rollback", w.run_id, "-m", str(cell.manifest),
                "--compensator-cmd", cell.command("compensate"), "--reader-cmd", cell.command("read"),
                "--retries", str(w.retries), "--retry-base-ms", "1", "--retry-max-ms", "4",
                "--approve-compensations", "--actor", OPERATOR, "--json",
                *(["--verify-cmd", cell.command("verify")] if w.verify else [])]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed, code = killed_at(cell, proc, kill, "reversi rollback")
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        if killed:
            return None
        if code not in (0, 2):
            raise AssertionError(f"reversi rollback exited {code}: {err.strip()}")
        report: dict[str, Any] = json.loads(out)
        cell.report("reversi rollback", report)
        return report

    def run(self, w: Workload) -> None:
        run = record(self.cell, w)
        if w.resolve_first:
            reconcile(self.cell, run)
        for kill in w.kills:
            self.rollback(w, kill)
        reconcile(self.cell, run)
        report = self.rollback(w, None)  # the re-run after the kill
        if report is None or not settled(report, tools_of(run)):
            finish(self.cell, run)  # more rounds (failures the retries did not absorb): no need of a CLI each

    def close(self) -> None:
        pass

def _server(cell: Cell) -> Any:
    from tests.reliability.server_driver import ServerDriver

    return ServerDriver(cell)


def _gateway(cell: Cell) -> Any:
    from tests.reliability.gateway_driver import GatewayDriver

    return GatewayDriver(cell)


DRIVERS: dict[str, Any] = {"sdk": SdkDriver, "cli": CliDriver, "server": _server, "gateway": _gateway}

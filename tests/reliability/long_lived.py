"""What the `server` and `gateway` targets share: one process that records and rolls back, killed by the
witness at the seed's moment, restarted by the operator, who then finishes the run through it.

The process a recovery starts stays up and serves the next seed of the cell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.reliability.processes import Listening
from tests.reliability.recovery import KILL_QUIET_MS, MAX_ROLLBACKS, settled
from tests.reliability.workload import Kill, Workload

if TYPE_CHECKING:
    from tests.reliability.campaign import Cell

WAIT_S = 60.0


class Died(Exception):
    """The process under test is gone (killed): what was asked of it failed."""


class LongLived:
    """Subclasses say how to start the process (`argv`, `env`, `pattern`), what the seed's agent and
    operator do through it (`workload`), and one round of the operator's recovery (`recover`: the report
    of a rollback, or {} when there is no run to recover)."""

    label = ""
    pattern = ""

    def __init__(self, cell: Cell, argv: list[str], env: dict[str, str]) -> None:
        self.cell = cell
        self.argv, self.env = argv, env
        self.process: Listening | None = None
        self.starts = 0

    def up(self) -> Listening:
        """The process, started anew if it died."""
        if self.process is None or not self.process.alive():
            self.starts += 1
            self.process = Listening(self.argv, self.env, self.pattern,
                                     self.cell.directory / f"{self.label}-{self.starts}.log")
            self.started()
        return self.process

    def started(self) -> None:
        """Called after each (re)start."""

    def died(self, exc: BaseException) -> Died:
        """`exc` came from a request to the process: Died if the process is gone, else `exc` itself."""
        assert self.process is not None
        try:
            self.process.proc.wait(WAIT_S)
        except Exception:
            raise exc from None  # it is alive: a real failure
        return Died()

    def armed(self, kill: Kill | None, what: Callable[[], Any]) -> Any:
        """Run `what()` with the witness armed to kill the process; None if it died first."""
        process = self.up()
        if kill is not None:
            self.cell.witness.arm(process.pid, kill.after, kill.delay_ms, self.label)
        try:
            return what()
        except Died:
            return None
        finally:
            if kill is not None and self.cell.witness.disarm():
                process.proc.wait(WAIT_S)
                self.cell.witness.settle(KILL_QUIET_MS)

    def run(self, w: Workload) -> None:
        self.armed(w.kills[0], lambda: self.workload(w))
        recovery_kill = w.kills[1] if len(w.kills) > 1 else None
        for i in range(MAX_ROLLBACKS + 2):
            self.cell.witness.settle(0)  # a call the gateway gave up on lands first: the operator sees it
            report = self.armed(recovery_kill if i == 0 else None, lambda: self.recover(w))
            if report == {} or (report is not None and settled(report, self.tools(w))):
                return
        raise AssertionError(f"{w.run_id}: the recovery did not settle the run in {MAX_ROLLBACKS + 2} rounds")

    def tools(self, w: Workload) -> dict[int, str]:
        return {s.index: s.tool for s in self.cell.ledger.get_run(w.run_id).steps()}

    def workload(self, w: Workload) -> None:
        raise NotImplementedError

    def recover(self, w: Workload) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        if self.process is not None:
            self.process.stop()

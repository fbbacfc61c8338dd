"""The fault campaign: seeds run on one target and back end (a cell), each followed by recovery and the checker.

A cell is one store, one witness and the processes worth keeping between seeds (a server or a gateway
that a recovery started serves the next seed). Each seed records and rolls back its own run, SIGKILLs
the process under test where its workload says, recovers the way an operator would, and is checked:
the checker's invariants over the whole store, and the recovery's own end (`recovery`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.reliability.checker import Violation, check
from tests.reliability.recovery import restored
from tests.reliability.witness_client import WitnessClient
from tests.reliability.workload import Workload, workload
from tests.reliability.world import ACKS, MANIFEST, REPORTS, WITNESS_LOG, append_line, read_lines

import reversi

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
WAIT_S = 60.0
QUIET_MS = 10  # after a run: an orphaned compensator a kill left starting up reaches the witness first


@dataclass
class SeedResult:
    seed: int
    target: str
    backend: str
    kills: int
    violations: list[Violation] = field(default_factory=list)

    def reproduce(self) -> str:
        return f"make soak SEED={self.seed}"


class Driver(Protocol):
    def run(self, w: Workload) -> None: ...

    def close(self) -> None: ...


class Cell:
    """One store and one witness, on which `run(seed)` runs seeds of one target and back end."""

    def __init__(self, target: str, store_url: str, directory: Path) -> None:
        self.target = target
        self.store_url = store_url
        self.directory = directory
        self.manifest = directory / "witness.yaml"
        self.reported: set[str] = set()
        self._witness: subprocess.Popen[str] | None = None
        self._driver: Driver | None = None
        self._ledger: reversi.Ledger | None = None

    def __enter__(self) -> Cell:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.manifest.write_text(MANIFEST)
        self._ledger = reversi.open(self.store_url, manifests=[str(self.manifest)])  # creates the store
        with (self.directory / "witness.log").open("a") as log:  # a request cut off by a kill is logged there
            self._witness = subprocess.Popen([sys.executable, str(HERE / "witness.py"), str(self.directory),
                                              self.store_url], stdout=subprocess.PIPE, stderr=log, text=True)
        assert self._witness.stdout is not None
        line = self._witness.stdout.readline()
        if not line:
            raise RuntimeError(f"the witness did not start (exit {self._witness.wait(WAIT_S)})")
        started = json.loads(line)
        self.socket, self.mcp_url = started["socket"], started["mcp"]
        self.witness = WitnessClient(self.socket)
        self._driver = _driver(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._driver is not None:
            self._driver.close()
        if self._witness is not None:
            self._witness.terminate()
            self._witness.wait(WAIT_S)
        if self._ledger is not None:
            self._ledger.close()

    @property
    def ledger(self) -> reversi.Ledger:
        assert self._ledger is not None
        return self._ledger

    def command(self, kind: str) -> str:
        """The compensator (`compensate`), reader (`read`) or verify (`verify`) command, which asks the witness."""
        return shlex.join([sys.executable, "-S", str(HERE / "witness_client.py"), kind, self.socket])

    def report(self, source: str, report: Mapping[str, Any]) -> None:
        """Keep a rollback report that was handed out, for the checker."""
        append_line(self.directory / REPORTS, {"source": source, "report": report})

    def ack(self, run_id: str, step: int, type_: str | list[str], by: str) -> None:
        """Keep what a process under test acknowledged as journaled (event `type_` of the step), for the checker."""
        append_line(self.directory / ACKS, {"by": by, "run_id": run_id, "step": step, "type": type_})

    def ack_call(self, run_id: str, op: str, type_: str | list[str], by: str) -> None:
        """`ack` for a caller that knows its call (`op`), not the step number it got."""
        append_line(self.directory / ACKS, {"by": by, "run_id": run_id, "op": op, "type": type_})

    def kills(self) -> int:
        return sum(1 for r in read_lines(self.directory / WITNESS_LOG) if r.get("kind") == "kill")

    def run(self, seed: int) -> SeedResult:
        """Run one seed of this cell's target, recover, and check; new violations only."""
        w = workload(seed)
        assert w.target == self.target and self._driver is not None
        before = self.kills()
        found = []
        try:
            self._driver.run(w)
        except Exception as exc:  # the recovery could not finish: reported with the seed, like a violation
            found.append(Violation("not-recovered", f"{type(exc).__name__}: {exc}", w.run_id))
        self.witness.settle(QUIET_MS)
        found += check(self.store_url, self.directory) + restored(self.directory, w.run_id, f"s{seed}-")
        new = [v for v in found if str(v) not in self.reported]
        self.reported |= {str(v) for v in found}
        return SeedResult(seed, w.target, w.backend, self.kills() - before, new)

    def faults(self) -> Counter[str]:
        """The faults injected so far, by kind."""
        counts: Counter[str] = Counter()
        for r in read_lines(self.directory / WITNESS_LOG):
            if r.get("kind") == "kill":
                counts["kills"] += 1
            elif r.get("kind") == "forward" and r.get("args", {}).get("fail"):
                counts["refused calls"] += 1
            elif r.get("kind") == "forward" and r.get("args", {}).get("timeout"):
                counts["timed-out calls"] += 1
            elif r.get("kind") == "compensate" and r.get("outcome") == "failed":
                counts["failed compensations"] += 1
            elif r.get("kind") == "read" and r.get("stale"):
                counts["stale read-backs"] += 1
        return counts


def _driver(cell: Cell) -> Driver:
    from tests.reliability.drivers import DRIVERS

    driver: Driver = DRIVERS[cell.target](cell)
    return driver

"""A rolling-back process for the race tests: `roller.py DB MANIFEST RUNS WITNESS SEED`.

It says `ready` and waits for `go`, then rolls back every run listed in the file RUNS (one id a line),
in an order shuffled by SEED, and says `done COMPLETE BUSY` (how many of its rollbacks completed, and
how many were refused because another process held the run). Its compensator is a witness: every
call is appended to WITNESS/calls.log (one line, the idempotency key), and the undo takes effect at
most once per key (WITNESS/effects/KEY, created exclusively; each creation appended to applied.log).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

import reversi
from reversi.errors import RollbackInProgress


def witness(directory: Path) -> Any:
    (directory / "effects").mkdir(exist_ok=True)

    def compensate(call: dict[str, Any]) -> dict[str, Any]:
        key = call["idempotency_key"]
        with (directory / "calls.log").open("a") as log:  # O_APPEND: whole lines from every process
            log.write(key + "\n")
        try:
            os.close(os.open(directory / "effects" / key, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return {"undone": key[:12], "again": True}
        with (directory / "applied.log").open("a") as log:
            log.write(key + "\n")
        return {"undone": key[:12]}

    return compensate


def main() -> int:
    db, manifest, runs_file, witness_dir, seed = sys.argv[1:6]
    runs = Path(runs_file).read_text().split()
    random.Random(int(seed)).shuffle(runs)
    compensate = witness(Path(witness_dir))
    complete = busy = 0
    with reversi.open(db, manifests=[manifest]) as ledger:
        print("ready", flush=True)
        sys.stdin.readline()
        for run_id in runs:
            try:
                report = ledger.get_run(run_id).rollback(compensate=compensate)
            except RollbackInProgress:
                busy += 1
                continue
            complete += report.complete
    print(f"done {complete} {busy}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

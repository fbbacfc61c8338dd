"""A child for tests/engine/test_durability.py: `durability_child.py DB DURABILITY [KILL_AT]`.

It records calls of `echo` in one run, one after another, and prints `run RUN_ID` first, then
`returned N` as each `run.call` returns (N: the step's number), until it is killed: by the test, or
with KILL_AT, by itself (SIGKILL) right after saying `returned KILL_AT`.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys

import reversi


def main(db: str, durability: str, kill_at: int | None) -> None:
    ledger = reversi.open(db, durability=durability)
    run = ledger.start_run(actor="child")
    print(f"run {run.id}", flush=True)
    for n in itertools.count():
        run.call("echo", {"n": n}, lambda n: {"echoed": n})
        print(f"returned {n}", flush=True)
        if n == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)

"""A recording process for the race tests: `racer.py DB MANIFEST RUN_ID ROUNDS`.

It continues RUN_ID, says `ready`, and waits for `go`. Each round it records calls as fast as it can
(`run.begin`, then `succeeded`) until one is refused as halted, then says
`halted ADMITTED LAST_ADMITTED_START REFUSED_START` (the monotonic clock, shared by every process of the
machine, when the last admitted call and the refused one began) and waits for `go` again.
"""

from __future__ import annotations

import sys
import time

import reversi
from reversi.errors import Halted


def main() -> int:
    db, manifest, run_id, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with reversi.open(db, manifests=[manifest]) as ledger:
        run = ledger.start_run(run_id=run_id)
        print("ready", flush=True)
        for _ in range(rounds):
            sys.stdin.readline()
            admitted, last = 0, 0.0
            while True:
                started = time.monotonic()
                try:
                    handle = run.begin("jobs.start", {"n": admitted})
                except Halted:
                    break
                handle.succeeded({"id": f"j{admitted}"})
                admitted, last = admitted + 1, started
                if admitted == 1:
                    print("recording", flush=True)
            print(f"halted {admitted} {last!r} {started!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

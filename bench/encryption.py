"""What encryption at rest costs: `run.call` with REVERSI_ENCRYPTION_KEYS set against the same calls in
clear, and the plan of a 10,000-step run whose values are sealed against the same run in clear. Both
sides run in one process on SQLite files side by side, in alternating batches, so drift hits both.

    python bench/encryption.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import base64
import os
from functools import partial

import reversi
from bench.common import Result, median, ms, print_table, temp_dir, timed, timed_calls, write_manifest
from bench.journal import MANIFEST, TOOL, call_args, noop
from reversi.core.plan import Plan
from reversi.engine.run import Run

KEYS = "k1=" + base64.b64encode(bytes(range(32))).decode()
CALL_TARGET = 1.15
PLAN_TARGET = 1.3


def _call(run: Run, i: int) -> object:
    return run.call(TOOL, call_args(i), noop)


def _plan(ledger: reversi.Ledger, run_id: str) -> Plan:
    return ledger.get_run(run_id).plan()


def _ledger(directory: Path, name: str, sealed: bool) -> reversi.Ledger:
    if sealed:
        os.environ["REVERSI_ENCRYPTION_KEYS"] = KEYS
    try:
        return reversi.open(f"sqlite:///{directory}/{name}.db", manifests=[write_manifest(directory, MANIFEST)])
    finally:
        os.environ.pop("REVERSI_ENCRYPTION_KEYS", None)


def _calls(quick: bool) -> Result:
    batches, per = (4, 50) if quick else (10, 200)
    with temp_dir("reversi-bench-enc-") as directory:
        clear, sealed = _ledger(directory, "clear", False), _ledger(directory, "sealed", True)
        runs = {False: clear.start_run(actor="bench"), True: sealed.start_run(actor="bench")}
        samples: dict[bool, list[float]] = {False: [], True: []}
        for batch in range(batches):
            for kind in (False, True) if batch % 2 == 0 else (True, False):
                got, _ = timed_calls(partial(_call, runs[kind]), batch * per, per)
                samples[kind] += got
        clear.close()
        sealed.close()
    base, enc = median(samples[False]), median(samples[True])
    ratio = enc / base
    return Result("encryption", "run.call, sealed (median)", ms(enc), ms(base), ratio, f"<= {CALL_TARGET}x",
                  ratio <= CALL_TARGET)


def _fill(ledger: reversi.Ledger, steps: int) -> str:
    run = ledger.start_run(actor="bench")
    for i in range(steps):
        run.begin(TOOL, call_args(i)).succeeded({"id": f"res_{i}", "ok": True})
    return str(run.id)


def _plans(quick: bool) -> Result:
    steps, rounds = (1_000, 3) if quick else (10_000, 5)
    with temp_dir("reversi-bench-enc-") as directory:
        clear, sealed = _ledger(directory, "clear", False), _ledger(directory, "sealed", True)
        ids = {False: _fill(clear, steps), True: _fill(sealed, steps)}
        ledgers = {False: clear, True: sealed}
        samples: dict[bool, list[float]] = {False: [], True: []}
        for r in range(rounds):
            for kind in (False, True) if r % 2 == 0 else (True, False):
                seconds, plan = timed(partial(_plan, ledgers[kind], ids[kind]))
                assert len(plan.actions) == steps
                samples[kind].append(seconds)
        clear.close()
        sealed.close()
    base, enc = median(samples[False]), median(samples[True])
    ratio = enc / base
    return Result("encryption", f"plan of {steps:,} sealed steps", ms(enc), ms(base), ratio, f"<= {PLAN_TARGET}x",
                  ratio <= PLAN_TARGET)


def bench(quick: bool = False) -> list[Result]:
    """Both lines: the sealed call and the sealed plan, each against its clear twin."""
    return [_calls(quick), _plans(quick)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print_table(bench(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


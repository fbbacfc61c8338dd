"""Journaling on one PostgreSQL from 1, 2, 4 and 8 recording processes at once, beside the floor.

Each recording process opens the ledger on a shared schema, starts a run of its own and calls
`run.call(tool, args, noop)` on a manifested tool for a fixed window; the figure is the calls all of
them journaled per second. The floor, in the same run, is the same number of processes writing the
same two bare commits per call (step row + `intended`, then `succeeded`) on a schema of their own, as
`journal.py`'s baseline does. Journaled and floor windows alternate, so drift in the machine hits
both. Targets at 8 processes: journaled >= 0.5 x the floor, and >= 2 x journaled with one process.

    python bench/bench_scale.py [--quick] [--seconds S]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from bench.common import (
    ROOT,
    Result,
    note,
    pg_schemas,
    pg_unreachable,
    pg_url,
    print_table,
    rate,
    rate_of_processes,
    raw_pg,
    temp_dir,
    write_manifest,
)
from bench.journal import ACTOR, MANIFEST, TOOL, PostgresBaseline, call_args, noop

PROCESSES = (1, 2, 4, 8)
FLOOR_TARGET = 0.5  # journaled / floor at 8 processes
GROWTH_TARGET = 2.0  # journaled at 8 processes / journaled at 1
WARMUP = 20


# -- one recording process ------------------------------------------------------------------------


def _journaled(url: str, manifest: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    import reversi

    ledger = reversi.open(url, manifests=[manifest])
    run = ledger.start_run(actor=ACTOR)
    return (lambda i: run.call(TOOL, call_args(i), noop)), ledger.close


def _floor(url: str, manifest: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    import psycopg

    from reversi.engine.manifest_files import load_manifest_files

    entry = load_manifest_files([manifest]).lookup(TOOL)
    assert entry is not None
    base = PostgresBaseline(url, entry.digest, f"run_floor_{os.getpid()}", psycopg.connect(url, autocommit=True))
    return base.call, base.close


def worker(mode: str, url: str, manifest: str, seconds: float) -> None:
    """Say `ready` once set up, wait for `go`, record for `seconds`, say `done CALLS ELAPSED`."""
    call, close = (_journaled if mode == "journal" else _floor)(url, manifest)
    for i in range(WARMUP):
        call(i)
    print("ready", flush=True)
    sys.stdin.readline()
    i, started = WARMUP, time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        call(i)
        i += 1
    elapsed = time.perf_counter() - started
    close()
    print(f"done {i - WARMUP} {elapsed}", flush=True)


# -- the measurement ------------------------------------------------------------------------------


def window(mode: str, url: str, manifest: str, processes: int, seconds: float) -> float:
    """Calls per second journaled (or written bare) by `processes` processes started together."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, url, manifest, str(seconds)]
    return rate_of_processes([argv] * processes, {**os.environ, "PYTHONPATH": str(ROOT / "src")})


def bench(quick: bool = False, seconds: float | None = None) -> list[Result]:
    url = pg_url()
    why = pg_unreachable(url)
    if why is not None:
        note(f"scale: skipped, PostgreSQL unreachable ({why})")
        return [Result("scale/postgres", "skipped", f"PostgreSQL unreachable: {why}")]
    assert url is not None
    seconds = seconds or (1.5 if quick else 4.0)
    rounds = 1 if quick else 2
    journaled: dict[int, list[float]] = {n: [] for n in PROCESSES}
    floor: dict[int, list[float]] = {n: [] for n in PROCESSES}
    with temp_dir("scale") as directory, pg_schemas(url, "ledger", "floor") as ((_, ledger_url), (_, floor_url)):
        manifest = write_manifest(directory, MANIFEST)
        import reversi

        reversi.open(ledger_url).close()  # migrated once, before the workers race to
        raw_pg(floor_url).close()
        for r in range(rounds):
            for n in PROCESSES:
                for mode in ("journal", "floor") if r % 2 == 0 else ("floor", "journal"):
                    got = window(mode, ledger_url if mode == "journal" else floor_url, manifest, n, seconds)
                    (journaled if mode == "journal" else floor)[n].append(got)
                    note(f"scale: {n} process(es), {mode}: {got:,.0f} calls/s")
    return results(journaled, floor, seconds, rounds)


def results(journaled: dict[int, list[float]], floor: dict[int, list[float]], seconds: float,
            rounds: int) -> list[Result]:
    best = {n: max(v) for n, v in journaled.items()}
    best_floor = {n: max(v) for n, v in floor.items()}
    name = "scale/postgres"
    found = []
    for n in PROCESSES:
        share = best[n] / best_floor[n]
        last = n == PROCESSES[-1]
        found.append(Result(
            name, f"{n} recording process{'es' if n > 1 else ''}: calls/s (x{best[n] / best[1]:.2f} of one; "
            f"floor x{best_floor[n] / best_floor[1]:.2f})",
            rate(best[n], "calls"), rate(best_floor[n], "calls"), best_floor[n] / best[n],
            f">= {FLOOR_TARGET} x floor" if last else "", share >= FLOOR_TARGET if last else None))
    growth = best[PROCESSES[-1]] / best[1]
    found.append(Result(name, f"growth: {PROCESSES[-1]} processes / 1", f"{growth:.2f}x", "", None,
                        f">= {GROWTH_TARGET}x", growth >= GROWTH_TARGET))
    note(f"scale: best of {rounds} window(s) of {seconds:g} s per figure")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows, one round")
    parser.add_argument("--seconds", type=float, help="seconds per window (default 4)")
    parser.add_argument("--worker", nargs=4, metavar=("MODE", "URL", "MANIFEST", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        mode, url, manifest, seconds = args.worker
        worker(mode, url, manifest, float(seconds))
        return 0
    print_table(bench(args.quick, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

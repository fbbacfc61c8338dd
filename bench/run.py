"""Run every benchmark and print one table: `python -m bench` or `python bench/run.py`.

    python -m bench [--quick]
                    [--only journal,planner,rollback,concurrent,encryption,lineage,server,gateway,console,scale,
                            gateway-http]
                    [--no-pg] [--pg-steps N]

PostgreSQL comes from REVERSI_BENCH_PG (default postgresql://postgres@127.0.0.1:5432/test); the
PostgreSQL lines are skipped, with the reason, when it cannot be reached.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import platform
import sqlite3
import subprocess
import time

from bench import concurrent, encryption, journal, lineage, planner, rollback
from bench.common import ROOT, Result, pg_unreachable, pg_url, print_table

BENCHES = ("journal", "planner", "rollback", "concurrent", "encryption", "lineage", "server", "gateway", "console",
           "scale", "gateway-http")
# These run as their own processes (each starts servers and clients) and print their own tables.
SEPARATE = {"server": "bench_server.py", "gateway": "bench_gateway.py", "console": "bench_console.py",
            "scale": "bench_scale.py", "gateway-http": "bench_gateway_http.py"}


IN_PROCESS = {"journal": journal.bench, "planner": planner.bench, "concurrent": concurrent.bench,
              "encryption": encryption.bench, "lineage": lineage.bench}


def header() -> str:
    import reversi

    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    url = pg_url()
    pg = f"PostgreSQL skipped ({why})" if (why := pg_unreachable(url)) else f"PostgreSQL at {url}"
    return (
        f"reversi {Path(reversi.__file__).parent} @ {commit or '?'} (+ working tree)\n"
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs; {pg}\n"
        "ratio = reversi time / baseline time (lower is better); 'info' lines have no target"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Reversi benchmarks: journaling, planner, rollback, server, gateway.")
    parser.add_argument("--quick", action="store_true", help="fewer calls and steps, for a smoke test")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated: " + ",".join(BENCHES))
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--pg-steps", type=int, default=rollback.STEPS, help="steps of the PostgreSQL rollback run")
    args = parser.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(chosen) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    if args.no_pg:
        os.environ["REVERSI_BENCH_PG"] = ""
    print(header(), flush=True)
    started = time.perf_counter()
    results: list[Result] = []
    for name in (c for c in chosen if c not in SEPARATE):
        t0 = time.perf_counter()
        print(f"\n== {name}", file=sys.stderr, flush=True)
        results += rollback.bench(args.quick, args.pg_steps) if name == "rollback" else IN_PROCESS[name](args.quick)
        print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if results:
        print()
        print_table(results)
    for name in (c for c in chosen if c in SEPARATE):
        print(f"\n== {name}", flush=True)
        script = [sys.executable, str(Path(__file__).resolve().parent / SEPARATE[name])]
        if args.quick:
            script.append("--quick")
        if name == "server" and not args.no_pg:
            script.append("--pg")
        subprocess.run(script, check=False)
    print(f"\ntotal {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The long fault campaign: `python -m tests.reliability.soak --seeds N` (`make soak`), from the repository root.

Seeds run in chunks of up to CHUNK seeds of one target and back end (a cell: one store, one witness),
`--jobs` chunks at a time. PostgreSQL seeds use REVERSI_TEST_PG_URL, each chunk in a schema of its own
that is dropped after; without it they are left out, and the summary says so. It ends with
`N runs, N kills, N violations` and, for each seed that broke an invariant, what broke and the command
that runs that seed again (`make soak SEED=N`). Exit 1 when anything broke.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
from tests.reliability.campaign import Cell, SeedResult
from tests.reliability.workload import cell

CHUNK = 25
PG_ENV = "REVERSI_TEST_PG_URL"


@contextmanager
def store(backend: str, directory: Path) -> Iterator[str]:
    """A fresh store for a chunk: a SQLite file, or a schema of its own on REVERSI_TEST_PG_URL's server."""
    if backend == "sqlite":
        yield f"sqlite:///{directory}/reversi.db"
        return
    server = os.environ[PG_ENV]
    schema = f"soak_{uuid.uuid4().hex}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        option = "options=" + quote(f"-csearch_path={schema}", safe="")
        yield f"{server}{'&' if '?' in server else '?'}{option}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def run_chunk(seeds: list[int], root: str) -> tuple[list[SeedResult], Counter[str]]:
    """Run seeds of one cell in one store and witness; their results and the faults injected."""
    target, backend = cell(seeds[0])
    directory = Path(tempfile.mkdtemp(prefix=f"{target}-{backend}-{seeds[0]}-", dir=root))
    with store(backend, directory) as url, Cell(target, url, directory) as running:
        results = [running.run(seed) for seed in seeds]
        return results, running.faults()


def chunks(seeds: list[int], with_postgres: bool) -> list[list[int]]:
    by_cell: dict[tuple[str, str], list[list[int]]] = {}
    for seed in seeds:
        key = cell(seed)
        if key[1] == "postgres" and not with_postgres:
            continue
        groups = by_cell.setdefault(key, [[]])
        if len(groups[-1]) == CHUNK:
            groups.append([])
        groups[-1].append(seed)
    return [group for groups in by_cell.values() for group in groups if group]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2000, help="How many seeds, from --first (default 2000).")
    parser.add_argument("--first", type=int, default=0, help="The first seed (default 0).")
    parser.add_argument("--seed", type=int, help="Run this one seed only (what a failure says to run).")
    parser.add_argument("--jobs", type=int, default=2, help="Chunks run at once (default 2).")
    parser.add_argument("--keep", metavar="DIR", help="Keep each chunk's store, witness log and process logs here.")
    opts = parser.parse_args(argv)
    seeds = [opts.seed] if opts.seed is not None else list(range(opts.first, opts.first + opts.seeds))
    with_postgres = bool(os.environ.get(PG_ENV))
    work = chunks(seeds, with_postgres)
    left_out = len(seeds) - sum(len(c) for c in work)
    if not work:
        what = f"seed {opts.seed} runs" if opts.seed is not None else "every seed asked for runs"
        print(f"{what} on PostgreSQL: set {PG_ENV}=postgresql://... to run it", file=sys.stderr)
        return 1
    root = opts.keep or tempfile.mkdtemp(prefix="reversi-soak-")
    Path(root).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[SeedResult] = []
    faults: Counter[str] = Counter()
    with ProcessPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        pending = [pool.submit(run_chunk, chunk, root) for chunk in work]
        for future in as_completed(pending):
            found, injected = future.result()
            results += found
            faults += injected
            broken = sum(1 for r in found if r.violations)
            print(f"{found[0].target}/{found[0].backend} seeds {found[0].seed}..{found[-1].seed}: "
                  f"{len(found)} runs, {sum(r.kills for r in found)} kills, {broken} broken", flush=True)
    report(results, faults, time.monotonic() - started, left_out)
    broke = any(r.violations for r in results)
    if opts.keep is None:  # a folder of our own: kept only to look into what broke
        if broke:
            print(f"the stores, witness logs and process logs are kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if broke else 0


def report(results: list[SeedResult], faults: Counter[str], seconds: float, left_out: int) -> None:
    violations = sum(len(r.violations) for r in results)
    print(f"{len(results)} runs, {sum(r.kills for r in results)} kills, {violations} violations ({seconds:.0f} s)")
    if faults:
        print("faults injected: " + ", ".join(f"{n} {kind}" for kind, n in sorted(faults.items())))
    runs = Counter(f"{r.target}/{r.backend}" for r in results)
    kills: Counter[str] = Counter()
    for r in results:
        kills[f"{r.target}/{r.backend}"] += r.kills
    print("by target: " + ", ".join(f"{name} {n} runs {kills[name]} kills" for name, n in sorted(runs.items())))
    if left_out:
        print(f"{left_out} PostgreSQL seeds left out: set {PG_ENV}=postgresql://... to run them")
    for r in sorted(results, key=lambda r: r.seed):
        for v in r.violations:
            print(f"seed {r.seed} ({r.target}, {r.backend}): {v}")
        if r.violations:
            print(f"  reproduce: {r.reproduce()}")


if __name__ == "__main__":
    sys.exit(main())

"""What every benchmark shares: results and the table, timing, temp manifests, scratch databases."""

from __future__ import annotations

import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
# Benchmark the tree we sit in, not whatever `reversi` happens to be installed.
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from reversi.store.schema import Backend, install_statements  # noqa: E402

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_url() -> str | None:
    """The PostgreSQL server to use: REVERSI_BENCH_PG (empty turns PostgreSQL off), else the default."""
    return os.environ.get("REVERSI_BENCH_PG", DEFAULT_PG_URL) or None


# -- results and the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One line of the table. `met` is None when the number is for information only."""

    bench: str
    metric: str
    value: str
    baseline: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs"


def rate(per_second: float, unit: str) -> str:
    return f"{per_second:,.0f} {unit}/s"


def print_table(results: list[Result], out: Any = None) -> None:
    out = out or sys.stdout
    head = ("benchmark", "metric", "reversi", "baseline", "ratio", "target", "met")
    rows = [
        (
            r.bench,
            r.metric,
            r.value,
            r.baseline,
            "" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target,
            "info" if r.met is None else ("yes" if r.met else "NO"),
        )
        for r in results
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]

    def line(cells: tuple[object, ...]) -> str:
        return "  ".join(f"{cell!s:<{w}}" for cell, w in zip(cells, widths, strict=True)).rstrip()

    print(line(head), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print(line(row), file=out)
    missed = [r for r in results if r.met is False]
    met = [r for r in results if r.met]
    print(f"\ntargets met: {len(met)}/{len(met) + len(missed)}", file=out)
    for r in missed:
        ratio = "" if r.ratio is None else f", {r.ratio:.2f}x the baseline"
        print(f"  missed: {r.bench} {r.metric}: {r.value}{ratio}; target {r.target}", file=out)
    out.flush()


def note(text: str) -> None:
    """A progress or detail line, on stderr so the table on stdout stays clean."""
    print(f"  {text}", file=sys.stderr, flush=True)


# -- timing ---------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def timed_calls(fn: Callable[[int], Any], start: int, count: int) -> tuple[list[float], float]:
    """Call fn(start) .. fn(start + count - 1); each call's seconds, and the wall time of the batch."""
    samples = []
    clock = time.perf_counter
    gc.collect()
    begin = clock()
    for i in range(start, start + count):
        t0 = clock()
        fn(i)
        samples.append(clock() - t0)
    return samples, clock() - begin


def timed(fn: Callable[[], Any], collect: bool = True) -> tuple[float, Any]:
    """Seconds `fn()` takes, and what it returned; `collect=False` keeps the cyclic GC off meanwhile."""
    gc.collect()
    if not collect:
        gc.disable()
    try:
        t0 = time.perf_counter()
        value = fn()
        return time.perf_counter() - t0, value
    finally:
        gc.enable()


# -- files and databases --------------------------------------------------------------------------


@contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=f"reversi-bench-{prefix}-") as name:
        yield Path(name)


def write_manifest(directory: Path, text: str, name: str = "tools.yaml") -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def schema_statements(backend: Backend) -> list[str]:
    """The ledger's schema, from the same SQL files a fresh store is made with."""
    return install_statements(backend)


def raw_sqlite(path: Path) -> sqlite3.Connection:
    """A bare connection to a scratch file with the ledger's schema and the store's pragmas."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("BEGIN IMMEDIATE")
    for statement in schema_statements("sqlite"):
        conn.execute(statement)
    conn.execute("COMMIT")
    return conn


def pg_unreachable(url: str | None) -> str | None:
    """Why PostgreSQL cannot be used, or None when it can."""
    if url is None:
        return "REVERSI_BENCH_PG is empty"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure means: skip, with the reason
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


@contextmanager
def pg_schemas(url: str, *suffixes: str) -> Iterator[list[tuple[str, str]]]:
    """Fresh schemas (one per suffix), yielded as (name, URL whose search_path is it); dropped after."""
    import psycopg

    tag = uuid.uuid4().hex[:10]
    names = [f"reversi_bench_{tag}_{s}" for s in suffixes]
    with psycopg.connect(url, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE SCHEMA "{name}"')
        try:
            yield [(name, with_search_path(url, name)) for name in names]
        finally:
            for name in names:
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def raw_pg(url: str) -> Any:
    """A bare psycopg connection (autocommit, transactions opened explicitly) with the ledger's schema."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    with conn.transaction():
        for statement in schema_statements("postgresql"):
            conn.execute(statement.encode())
    return conn


# -- processes started together -------------------------------------------------------------------


def rate_of_processes(argvs: list[list[str]], env: dict[str, str] | None = None) -> float:
    """Start one process per argv; once each says `ready`, tell them all `go`; each then works for its
    window and says `done COUNT SECONDS`. The sum of the counts per second of the longest window."""
    import subprocess

    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for argv in argvs]
    try:
        for proc in procs:
            assert proc.stdout is not None
            said = proc.stdout.readline().strip()
            assert said == "ready", f"{argvs[0][:3]} did not start (said {said!r})"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        count, elapsed = 0, 0.0
        for proc in procs:
            assert proc.stdout is not None
            _, done, took = proc.stdout.readline().split()
            count, elapsed = count + int(done), max(elapsed, float(took))
        return count / elapsed
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

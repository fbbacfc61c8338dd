"""Recording calls over HTTP: `reversi-server` journaling intended + outcome, against its own /healthz.

A server subprocess serves a fresh store with an agent key. This process is the client:

* throughput: 32 concurrent clients (one keep-alive connection and one run each) record calls, each
  call being `POST /v1/runs/{id}/steps` then `POST /v1/runs/{id}/steps/{n}/outcome`; the baseline
  is the same clients making two `GET /healthz` per "call" on the same server, in the same run.
  The clients are a minimal asyncio HTTP/1.1 client: httpx.AsyncClient with 32 connections tops out
  at a few hundred requests/s on a 2-core machine, far below the server, and would measure itself.
* latency: one httpx.Client records calls one after the other; the baseline is two /healthz in a row.
  A third side is the floor under any journaling HTTP server on this machine: a bare ASGI app on the
  same uvicorn (uvloop, httptools) that parses each POST's JSON, commits one row for it to SQLite with
  the store's settings (WAL, synchronous=FULL) and answers JSON. It checks nothing and keeps no
  journal worth the name; what reversi takes over it is what reversi itself costs.

Phases alternate (healthz, record, bare, healthz, record, bare) so drift hits every side alike.

    python bench/bench_server.py [--quick] [--pg]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import httpx

from bench.common import (
    ROOT,
    Result,
    median,
    ms,
    note,
    percentile,
    pg_schemas,
    pg_unreachable,
    pg_url,
    print_table,
    rate,
    temp_dir,
    write_manifest,
)
from reversi.engine.keys import create_key
from reversi.store.factory import open_store

CLIENTS = 32
RATE_TARGET = 1_500
P50_TARGET_S = 0.002
MANIFEST = """\
version: 1
tools:
  inventory.reserve:
    compensation:
      tool: inventory.release
      args: {reservation: "$result.id"}
"""


@contextmanager
def server(db_url: str, manifest: str) -> Iterator[str]:
    """`reversi-server` on a free loopback port; yields its base URL."""
    exe = Path(sys.executable).parent / "reversi-server"
    env = {**os.environ, "REVERSI_MANIFEST": manifest, "PYTHONPATH": str(ROOT / "src")}
    with _serving([str(exe), "--port", "0", "--db", db_url, "--log-level", "warning"], env) as url:
        yield url


@contextmanager
def bare_server(db_path: Path) -> Iterator[str]:
    """The floor (`serve_bare_journal`) on a free loopback port; yields its base URL."""
    with _serving([sys.executable, str(Path(__file__).resolve()), "--serve-bare-journal", str(db_path)],
                  dict(os.environ)) as url:
        yield url


@contextmanager
def _serving(argv: list[str], env: dict[str, str]) -> Iterator[str]:
    """A server subprocess that prints `listening on URL` to stderr; yields the URL, then stops it."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        else:
            raise SystemExit(f"{Path(argv[0]).name} did not start (exit {proc.wait()})")
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def serve_bare_journal(db_path: str) -> None:
    """The floor: uvicorn as reversi-server runs it, and per POST one committed row, nothing else."""
    import socket
    import sqlite3

    import uvicorn

    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY, path TEXT NOT NULL, body TEXT NOT NULL)")
    healthy = json.dumps({"status": "ok"}).encode()

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                  send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        status, answer = 200, healthy
        if scope["method"] == "POST":
            body = json.loads(b"".join(chunks))
            conn.execute("BEGIN IMMEDIATE")
            seq = conn.execute("INSERT INTO calls (path, body) VALUES (?, ?) RETURNING seq",
                               (scope["path"], json.dumps(body))).fetchone()[0]
            conn.execute("COMMIT")
            status = 201 if scope["path"].endswith("/steps") else 200
            answer = json.dumps({"step": seq, "status": "intended"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")).run(sockets=[sock])


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol for this benchmark."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: str) -> None:
        self.reader, self.writer, self.key = reader, writer, key

    @classmethod
    async def open(cls, url: str, key: str) -> Connection:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)), key)

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        self.writer.write(head.encode() + data)
        answer = await self.reader.readuntil(b"\r\n\r\n")
        lines = answer.split(b"\r\n")
        length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:"))
        return int(lines[0].split(b" ")[1]), json.loads(await self.reader.readexactly(length))

    def close(self) -> None:
        self.writer.close()


async def record_call(conn: Connection, run_id: str, i: int) -> None:
    status, begun = await conn.request("POST", f"/v1/runs/{run_id}/steps",
                                       {"tool": "inventory.reserve", "args": {"qty": i}})
    done, _ = await conn.request("POST", f"/v1/runs/{run_id}/steps/{begun['step']}/outcome",
                                 {"status": "succeeded", "result": {"id": f"res_{i}"}})
    if (status, done) != (201, 200):
        raise SystemExit(f"recording failed: {status} {done}")


async def health_pair(conn: Connection, run_id: str, i: int) -> None:
    for _ in range(2):
        status, _ = await conn.request("GET", "/healthz")
        if status != 200:
            raise SystemExit(f"healthz failed: {status}")


Op = Callable[[Connection, str, int], Awaitable[None]]


async def concurrent_rate(conns: list[Connection], runs: list[str], op: Op, seconds: float) -> float:
    """Calls per second of `op`, one task per connection (and run), over `seconds` of wall time."""
    stop = time.perf_counter() + seconds
    counts = [0] * len(runs)

    async def worker(n: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            await op(conns[n], runs[n], i)
            i += 1
        counts[n] = i

    start = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(len(runs))))
    return sum(counts) / (time.perf_counter() - start)


async def throughput(url: str, key: str, seconds: float) -> dict[str, list[float]]:
    conns = [await Connection.open(url, key) for _ in range(CLIENTS)]
    runs = [(await c.request("POST", "/v1/runs", {"scope": {"actor": f"agent-{n}"}}))[1]["run_id"]
            for n, c in enumerate(conns)]
    await concurrent_rate(conns, runs, record_call, seconds / 4)  # warm-up
    await concurrent_rate(conns, runs, health_pair, seconds / 4)
    rates: dict[str, list[float]] = {"record": [], "health": []}
    for _ in range(2):
        rates["health"].append(await concurrent_rate(conns, runs, health_pair, seconds))
        rates["record"].append(await concurrent_rate(conns, runs, record_call, seconds))
    for c in conns:
        c.close()
    return rates


def latency(url: str, bare_url: str | None, key: str, count: int) -> dict[str, list[float]]:
    """One httpx.Client per server, one call at a time: (intended + outcome) against two /healthz,
    and the same two POSTs to the bare server (`serve_bare_journal`) when there is one."""
    samples: dict[str, list[float]] = {"record": [], "health": [], "bare": []}
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client, \
            httpx.Client(base_url=bare_url or url, headers=headers, timeout=60) as bare_client:
        run_id = client.post("/v1/runs", json={}).json()["run_id"]

        def recorder(http: httpx.Client) -> Callable[[int], None]:
            def record(i: int) -> None:
                step = http.post(f"/v1/runs/{run_id}/steps", json={"tool": "inventory.reserve", "args": {"qty": i}})
                http.post(f"/v1/runs/{run_id}/steps/{step.json()['step']}/outcome",
                          json={"status": "succeeded", "result": {"id": f"res_{i}"}})
            return record

        def health(i: int) -> None:
            client.get("/healthz")
            client.get("/healthz")

        sides = {"health": health, "record": recorder(client)}
        if bare_url:
            sides["bare"] = recorder(bare_client)
        for fn in sides.values():
            for i in range(count // 10):
                fn(i)
        for _ in range(2):
            for side, fn in sides.items():
                for i in range(count):
                    t0 = time.perf_counter()
                    fn(i)
                    samples[side].append(time.perf_counter() - t0)
    return samples


def measure(url: str, bare_url: str | None, key: str, seconds: float, count: int) -> dict[str, Any]:
    return {"rates": asyncio.run(throughput(url, key, seconds)), "latency": latency(url, bare_url, key, count)}


def results(name: str, measured: dict[str, Any], rate_target: int | None) -> list[Result]:
    rec_rate, base_rate = max(measured["rates"]["record"]), max(measured["rates"]["health"])
    rec, base, bare = (measured["latency"][side] for side in ("record", "health", "bare"))
    note(f"{name}: record rates {[f'{r:,.0f}' for r in measured['rates']['record']]}, "
         f"healthz pairs {[f'{r:,.0f}' for r in measured['rates']['health']]}")
    return [
        Result(name, f"journaled calls/s, {CLIENTS} clients", rate(rec_rate, "calls"), rate(base_rate, "pairs"),
               base_rate / rec_rate, f">= {rate_target:,} calls/s" if rate_target else "",
               rec_rate >= rate_target if rate_target else None),
        Result(name, "p50 one call (intended + outcome)", ms(median(rec)), ms(median(base)),
               median(rec) / median(base), f"<= {ms(P50_TARGET_S)}" if rate_target else "",
               median(rec) <= P50_TARGET_S if rate_target else None),
        Result(name, "p99 one call", ms(percentile(rec, 0.99)), ms(percentile(base, 0.99)),
               percentile(rec, 0.99) / percentile(base, 0.99)),
    ] + ([
        Result(name, "floor: bare app, one commit per POST, p50", ms(median(bare)), ms(median(base)),
               median(bare) / median(base)),
        Result(name, "what reversi adds over the floor, p50", ms(median(rec) - median(bare))),
        Result(name, "p50 one call against the floor's", ms(median(rec)), ms(median(bare)), median(rec) / median(bare)),
    ] if bare else [])


def bench(name: str, db_url: str, directory: Path, seconds: float, count: int, target: int | None,
          floor: bool = False) -> list[Result]:
    with open_store(db_url) as store:
        _, key = create_key(store, "bench-agent", "agent")
    with server(db_url, write_manifest(directory, MANIFEST)) as url, \
            (bare_server(directory / "bare.db") if floor else nullcontext()) as bare_url:
        note(f"{name}: serving {url}" + (f", the floor at {bare_url}" if bare_url else ""))
        return results(name, measure(url, bare_url, key, seconds, count), target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Shorter phases (numbers are noisier).")
    parser.add_argument("--pg", action="store_true", help="Also run on PostgreSQL (REVERSI_BENCH_PG).")
    parser.add_argument("--serve-bare-journal", metavar="DB", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_bare_journal:
        serve_bare_journal(opts.serve_bare_journal)
        return
    seconds, count = (2.0, 200) if opts.quick else (5.0, 1000)
    out: list[Result] = []
    with temp_dir("server") as directory:
        out += bench("server sqlite", f"sqlite:///{directory}/bench.db", directory, seconds, count, RATE_TARGET,
                     floor=True)
        url = pg_url() if opts.pg else None
        why = pg_unreachable(url) if opts.pg else "pass --pg"
        if url is not None and why is None:
            with pg_schemas(url, "server") as [(_, schema_url)]:
                out += bench("server postgres", schema_url, directory, seconds, count, None)
        else:
            note(f"server postgres: skipped ({why})")
    print_table(out)


if __name__ == "__main__":
    main()

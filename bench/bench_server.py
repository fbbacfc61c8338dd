"""Recording calls over HTTP: `reversi-server` journaling intended + outcome, against its own /healthz.

A server subprocess serves a fresh store with an agent key. This process is the client:

* throughput: 32 concurrent clients (one keep-alive connection and one run each) record calls, each
  call being `POST /v1/runs/{id}/steps` then `POST /v1/runs/{id}/steps/{n}/outcome`; the baseline
  is the same clients making two `GET /healthz` per "call" on the same server, in the same run.
  The clients are a minimal asyncio HTTP/1.1 client: httpx.AsyncClient with 32 connections tops out
  at a few hundred requests/s on a 2-core machine, far below the server, and would measure itself.
* latency: one httpx.Client records calls one after the other; the baseline is two /healthz in a row.

Phases alternate (healthz, record, healthz, record) so drift hits both alike.

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
from contextlib import contextmanager
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
from reversi.store.base import open_store

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
    proc = subprocess.Popen([str(exe), "--port", "0", "--db", db_url, "--log-level", "warning"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        else:
            raise SystemExit(f"reversi-server did not start (exit {proc.wait()})")
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


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


def latency(url: str, key: str, count: int) -> dict[str, list[float]]:
    """One httpx.Client, one call at a time: (intended + outcome) against two /healthz."""
    samples: dict[str, list[float]] = {"record": [], "health": []}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        run_id = client.post("/v1/runs", json={}).json()["run_id"]

        def record(i: int) -> None:
            step = client.post(f"/v1/runs/{run_id}/steps", json={"tool": "inventory.reserve", "args": {"qty": i}})
            client.post(f"/v1/runs/{run_id}/steps/{step.json()['step']}/outcome",
                        json={"status": "succeeded", "result": {"id": f"res_{i}"}})

        def health(i: int) -> None:
            client.get("/healthz")
            client.get("/healthz")

        for i in range(count // 10):
            record(i)
        for _ in range(2):
            for side, fn in (("health", health), ("record", record)):
                for i in range(count):
                    t0 = time.perf_counter()
                    fn(i)
                    samples[side].append(time.perf_counter() - t0)
    return samples


def measure(url: str, key: str, seconds: float, count: int) -> dict[str, Any]:
    return {"rates": asyncio.run(throughput(url, key, seconds)), "latency": latency(url, key, count)}


def results(name: str, measured: dict[str, Any], rate_target: int | None) -> list[Result]:
    rec_rate, base_rate = max(measured["rates"]["record"]), max(measured["rates"]["health"])
    rec, base = measured["latency"]["record"], measured["latency"]["health"]
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
    ]


def bench(name: str, db_url: str, directory: Path, seconds: float, count: int, target: int | None) -> list[Result]:
    with open_store(db_url) as store:
        _, key = create_key(store, "bench-agent", "agent")
    with server(db_url, write_manifest(directory, MANIFEST)) as url:
        note(f"{name}: serving {url}")
        return results(name, measure(url, key, seconds, count), target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Shorter phases (numbers are noisier).")
    parser.add_argument("--pg", action="store_true", help="Also run on PostgreSQL (REVERSI_BENCH_PG).")
    opts = parser.parse_args()
    seconds, count = (2.0, 200) if opts.quick else (5.0, 1000)
    out: list[Result] = []
    with temp_dir("server") as directory:
        out += bench("server sqlite", f"sqlite:///{directory}/bench.db", directory, seconds, count, RATE_TARGET)
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

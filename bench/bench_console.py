"""The web console's pages over a big store: 1,000 runs and a 300-step run, against the same server's /healthz.

A `reversi-server` subprocess (keyless, loopback: every request is the admin `local`) serves a SQLite
store seeded through the SDK with 1,000 small runs (a charge, a timed-out charge, an email) and one
run of 300 steps with `depends_on` chains, approvals and refused calls. One httpx client then loads
each page in turn, many times over; the baseline is `/healthz` from the same client in the same run,
measured between the pages so drift hits both alike.

    python bench/bench_console.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import contextlib
import time

import httpx

import reversi
from bench.bench_server import server
from bench.common import Result, median, ms, note, print_table, temp_dir, write_manifest
from reversi.errors import Refused

RUNS = 1_000
BIG_STEPS = 300
# What "fast" means for a page an operator reloads at 3 a.m.: the whole page, rendered, in a
# fraction of a second however much the store holds.
TARGET_S = 0.5
TARGET_KIB = 200  # the 300-step run's page: what a browser downloads and lays out
MANIFEST = """\
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id"}
      residue: ["the charge still appears on the customer's statement"]
  github.create_repo:
    compensation: {tool: github.delete_repo, args: {name: "$args.name"}}
  github.add_file:
    requires: ["github.create_repo"]
    compensation: {tool: github.delete_file, args: {path: "$args.path"}}
  deploy.release:
    requires_approval: false
    compensation:
      tool: deploy.rollback
      args: {id: "$result.id"}
      requires_approval: true
  email.send:
    irreversible: true
"""


def seed(db_url: str, manifest: str, runs: int, big_steps: int) -> str:
    """Fill the store; returns the big run's id."""
    with reversi.open(db_url, manifests=[manifest]) as ledger:
        for i in range(runs):
            run = ledger.start_run(actor=f"agent-{i % 7}", tenant=f"tenant-{i % 3}", labels={"batch": str(i % 5)})
            run.begin("stripe.create_charge", {"amount": 100 + i}).succeeded({"id": f"ch_{i}"})
            run.begin("stripe.create_charge", {"amount": 200 + i}).uncertain("timed out")
            run.begin("email.send", {"to": f"c{i}@example.com"}).succeeded({"id": f"m_{i}"})
        big = ledger.start_run(actor="deploy-agent", tenant="tenant-0")
        for i in range(big_steps):
            kind = i % 6
            if kind == 0:
                big.begin("github.create_repo", {"name": f"r{i}"}).succeeded({"id": i})
            elif kind == 1:
                big.begin("github.add_file", {"path": f"f{i}"}, depends_on=[i - 1]).succeeded({"sha": f"s{i}"})
            elif kind == 2:
                big.begin("deploy.release", {"v": i}, depends_on=[i - 1]).succeeded({"id": f"rel_{i}"})
            elif kind == 3:
                big.begin("stripe.create_charge", {"amount": i}).uncertain("timed out")
            elif kind == 4:
                big.begin("email.send", {"to": "ops@example.com", "n": i}).succeeded({"id": f"m{i}"})
            else:
                big.begin("unknown.tool", {"n": i}).succeeded({"n": i})
        ledger.add_halt("bench: refuse one call", tool="blocked.*")
        with contextlib.suppress(Refused):
            big.begin("blocked.tool", {})
        ledger.lift_halts()
        return big.id


def load(client: httpx.Client, path: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(path)
        samples.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"GET {path} answered {response.status_code}: {response.text[:200]}")
    return samples


def bench(quick: bool) -> list[Result]:
    runs, count = (200, 5) if quick else (RUNS, 20)
    with temp_dir("console") as directory:
        db_url = f"sqlite:///{directory}/bench.db"
        manifest = write_manifest(directory, MANIFEST)
        started = time.perf_counter()
        big = seed(db_url, manifest, runs, BIG_STEPS)
        note(f"console: seeded {runs} runs and a {BIG_STEPS}-step run in {time.perf_counter() - started:.0f} s")
        pages = {
            f"runs list ({runs} runs)": "/",
            "runs needing attention": "/?attention=any",
            f"run page ({BIG_STEPS} steps)": f"/runs/{big}",
            "approvals": "/approvals",
            "halts": "/halts",
        }
        with server(db_url, manifest) as url, httpx.Client(base_url=url, timeout=60) as client:
            load(client, "/healthz", 3)
            for path in pages.values():
                load(client, path, 1)  # warm: caches, templates
            health: list[float] = []
            timings: dict[str, list[float]] = {}
            for name, path in pages.items():
                health += load(client, "/healthz", count)
                timings[name] = load(client, path, count)
            health += load(client, "/healthz", count)
            big_page = len(client.get(pages[f"run page ({BIG_STEPS} steps)"]).content) / 1024
            health_size = len(client.get("/healthz").content) / 1024
    base = median(health)
    out = []
    for name, samples in timings.items():
        page = median(samples)
        out.append(Result("console", f"{name}: median load", ms(page), f"healthz {ms(base)}", page / base,
                          f"< {ms(TARGET_S)}", page < TARGET_S))
    out.append(Result("console", f"run page ({BIG_STEPS} steps): size", f"{big_page:.0f} KiB",
                      f"healthz {health_size * 1024:.0f} B", big_page / health_size, f"< {TARGET_KIB} KiB",
                      big_page < TARGET_KIB))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 runs and fewer loads (numbers are noisier).")
    print_table(bench(parser.parse_args().quick))


if __name__ == "__main__":
    main()

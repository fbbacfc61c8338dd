"""The planner on large runs: `plan_rollback(snapshot, manifests)` at 10k, 30k and 100k steps.

The snapshot is built in memory from a repeating, realistic mix: reads, compensations whose
arguments come from `$result` (including `[*]`), a read-back, irreversible and idempotent steps,
unmanifested ones, `depends_on`, and a charge tool that `requires` a glob of the customer tool.
A few steps failed, were already compensated, time out, or lack the result field their undo
needs; a few were recorded under an older manifest entry (plan notes). The newest charge timed
out, so every customer before it is deferred through the `requires` glob.

Loading the same 100k-step run from SQLite (`run.snapshot()`) is timed apart against a bare SELECT
of the same rows (target: at most twice as long; with the cyclic GC off, for information).

    python bench/planner.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import Any

import reversi
from bench.common import Result, median, ms, note, print_table, temp_dir, timed, us, write_manifest
from reversi.core.manifest import ManifestSet
from reversi.core.models import (
    EventType,
    Mode,
    NewEvent,
    RunRecord,
    RunSnapshot,
    Scope,
    StepRecord,
    StepState,
    StepStatus,
    utc_now,
)
from reversi.core.plan import Plan, compensation_key
from reversi.core.planner import plan_rollback
from reversi.engine.manifest_files import load_manifest_files

SIZES = (10_000, 30_000, 100_000)
PLAN_TARGET_S = 1.0
GROWTH_TARGET = 1.5  # time per step at N over time per step at 10k; 1.0 is perfectly linear
LOAD_TARGET = 2.0  # run.snapshot() of the 100k-step run over a bare SELECT of its rows

MANIFEST = """\
version: 1
tools:
  crm.get_*:
    effect: read
  crm.create_contact:
    compensation:
      tool: crm.delete_contact
      args: {id: "$result.id"}
      kind: inverse
    verification:
      tool: crm.get_contact
      args: {id: "$result.id"}
      expect: {deleted: true}
  crm.tag_contacts:
    compensation:
      tool: crm.untag_contacts
      args: {ids: "$result.tagged[*].id", tag: "$args.tag", note: "undo of step ${args.tag}"}
  stripe.create_customer:
    compensation:
      tool: stripe.delete_customer
      args: {customer: "$result.id"}
  stripe.create_charge:
    requires: ["stripe.create_cust*"]
    idempotency:
      key: ["$args.customer", "$args.order_id"]
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id", amount: "$args.amount", reason: "requested_by_customer"}
      residue: ["the charge still appears on the customer's statement"]
  email.send:
    irreversible: true
  files.write:
    idempotent: true
  kg.create_entities:
    compensation:
      tool: kg.delete_entities
      args: {entityNames: "$result.entities[*].name"}
"""


def _step(i: int) -> tuple[str, dict[str, Any], tuple[int, ...], dict[str, Any]]:
    """Tool, arguments, depends_on and result of step i of the repeating mix."""
    slot = i % 10
    if slot == 0:
        return "crm.get_contact", {"email": f"u{i}@example.com"}, (), {"id": f"ct_{i}", "name": "Ada"}
    if slot == 1:
        return "stripe.create_customer", {"email": f"u{i}@example.com"}, (), {"id": f"cus_{i}"}
    if slot == 2:
        args = {"customer": f"cus_{i - 1}", "amount": 700 + i % 50, "order_id": f"o_{i}"}
        return "stripe.create_charge", args, (i - 1,), {"id": f"ch_{i}", "status": "succeeded"}
    if slot == 3:
        return "crm.create_contact", {"name": f"Contact {i}"}, (), {"id": f"ct_{i}"}
    if slot == 4:
        result = {"tagged": [{"id": f"ct_{i - 1}"}, {"id": f"ct_{i - 4}"}]}
        return "crm.tag_contacts", {"tag": "vip", "ids": [f"ct_{i - 1}"]}, (i - 1,), result
    if slot == 5:
        return "email.send", {"to": f"u{i}@example.com", "subject": "Your order"}, (), {"id": f"m_{i}"}
    if slot == 6:
        return "files.write", {"path": f"/tmp/out/{i}.txt", "content": "x" * 40}, (), {"ok": True}
    if slot == 7:
        result = {"entities": [{"name": f"e{i}a"}, {"name": f"e{i}b"}, {"name": f"e{i}c"}]}
        return "kg.create_entities", {"entities": [f"e{i}a", f"e{i}b", f"e{i}c"]}, (), result
    if slot == 8:
        return "weather.lookup", {"city": "Oslo"}, (), {"temp": 3}  # no manifest entry
    return "crm.get_deals", {"contact": f"ct_{i - 6}"}, (), {"deals": []}


def _status(rng: random.Random, tool: str) -> StepStatus | str:
    """Mostly succeeded; a few failed, compensated, timed out, or missing the result field."""
    if tool == "stripe.create_charge":
        return StepStatus.SUCCEEDED  # a standing charge blocks every earlier customer: see the newest one
    roll = rng.random()
    if roll < 0.03:
        return StepStatus.FAILED
    if roll < 0.05:
        return StepStatus.COMPENSATED
    if roll < 0.055:
        return StepStatus.UNCERTAIN
    if roll < 0.065:
        return "no-result-field"
    return StepStatus.SUCCEEDED


def build_records(n: int, run_id: str, manifests: ManifestSet, seed: int = 7) -> list[StepState]:
    """The first n steps of the mix, as the store would derive them."""
    rng = random.Random(seed)
    steps = []
    last_charge = max(i for i in range(n) if i % 10 == 2)
    for i in range(n):
        tool, args, depends_on, result = _step(i)
        entry = manifests.lookup(tool)
        digest = entry.digest if entry else None
        if entry is not None and rng.random() < 0.01:
            digest = "0" * 64  # recorded under an older entry: a plan note
        record = StepRecord(run_id, i, tool, args, depends_on, False, digest, None)
        status = StepStatus.UNCERTAIN if i == last_charge else _status(rng, tool)
        if status == "no-result-field":
            steps.append(StepState(record, StepStatus.SUCCEEDED, {"status": "ok"}, True))
        elif status is StepStatus.SUCCEEDED or status is StepStatus.COMPENSATED:
            steps.append(StepState(record, status, result, True, attempts=1 if status is StepStatus.COMPENSATED else 0))
        elif status is StepStatus.FAILED:
            steps.append(StepState(record, status, error="card_declined"))
        else:
            steps.append(StepState(record, StepStatus.UNCERTAIN, error="timed out after 30 s"))
    return steps


def run_record(run_id: str) -> RunRecord:
    return RunRecord(run_id, "local", Mode.OBSERVE, Scope("bench-agent", "acme", "prod"), {}, utc_now())


def kinds(plan: Plan) -> Counter[str]:
    return Counter(a.kind.value for a in plan.actions)


def time_planner(snapshot: RunSnapshot, manifests: ManifestSet, reps: int) -> tuple[float, Plan]:
    times, plan = [], None
    for _ in range(reps):
        seconds, plan = timed(lambda: plan_rollback(snapshot, manifests))
        times.append(seconds)
    assert plan is not None
    return median(times), plan


def time_without_gc(snapshot: RunSnapshot, manifests: ManifestSet) -> float:
    return timed(lambda: plan_rollback(snapshot, manifests), collect=False)[0]


# -- loading the snapshot from SQLite --------------------------------------------------------------


def step_events(state: StepState) -> list[NewEvent]:
    """The events that leave a step in `state`, as the recorder and executor journal them."""
    rec, actor = state.record, "bench-agent"
    intended = {"tool": rec.tool, "args": rec.args, "depends_on": list(rec.depends_on), "manifested": True}
    events = [NewEvent(EventType.INTENDED, rec.step, actor, intended)]
    if state.status is StepStatus.FAILED:
        return [*events, NewEvent(EventType.FAILED, rec.step, actor, {"error": state.error})]
    if state.status is StepStatus.UNCERTAIN:
        return [*events, NewEvent(EventType.UNCERTAIN, rec.step, actor, {"error": state.error})]
    events.append(NewEvent(EventType.SUCCEEDED, rec.step, actor, {"result": state.result}))
    if state.status is StepStatus.COMPENSATED:
        key = compensation_key(rec.run_id, rec.step, "undo")
        events.append(
            NewEvent(EventType.COMPENSATING, rec.step, "dana", {"tool": "undo", "idempotency_key": key, "attempt": 1})
        )
        events.append(NewEvent(EventType.COMPENSATED, rec.step, "dana", {"result": None, "attempts": 1}))
    return events


def seed_run(ledger: reversi.Ledger, run: reversi.Run, states: list[StepState]) -> None:
    """Write the steps' rows and events through the store's own queries, in one transaction."""
    with ledger.store.write() as q:
        for state in states:
            q.insert_step(state.record)
            q.append(run.id, step_events(state))


def raw_select(path: Path, run_id: str) -> Callable[[], int]:
    conn = sqlite3.connect(path)

    def select() -> int:
        steps = conn.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,)).fetchall()
        events = conn.execute("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        return len(steps) + len(events)

    return select


def bench_snapshot_load(n: int, manifest: str, directory: Path, reps: int) -> list[Result]:
    name = f"snapshot/sqlite {n // 1000}k"
    with reversi.open(f"sqlite:///{directory / 'plan.db'}", manifests=[manifest]) as ledger:
        run = ledger.start_run(actor="bench-agent", tenant="acme", environment="prod")
        states = build_records(n, run.id, ledger.manifests)
        seconds, _ = timed(lambda: seed_run(ledger, run, states))
        note(f"{name}: seeded {n:,} steps through Queries in one transaction in {seconds:.1f} s")
        loads = []
        for _ in range(reps):
            seconds, snapshot = timed(run.snapshot)
            loads.append(seconds)
        load_no_gc, _ = timed(run.snapshot, collect=False)
        select = raw_select(directory / "plan.db", run.id)
        raw = median([timed(select)[0] for _ in range(reps)])
        assert len(snapshot.steps) == n
        in_memory = plan_rollback(RunSnapshot(run.record, tuple(states)), ledger.manifests)
        e2e, plan = timed(run.plan)
        assert kinds(plan) == kinds(in_memory), (kinds(plan), kinds(in_memory))
        load = median(loads)
    return [
        Result(name, "run.snapshot() load", ms(load), f"{ms(raw)} raw SELECT", load / raw,
               f"ratio <= {LOAD_TARGET:.0f}", load / raw <= LOAD_TARGET),
        Result(name, "run.snapshot() load, cyclic GC off", ms(load_no_gc), f"{ms(raw)} raw SELECT", load_no_gc / raw),
        Result(name, "run.plan() = load + plan", ms(e2e)),
    ]


def bench(quick: bool = False) -> list[Result]:
    reps = 2 if quick else 3
    results: list[Result] = []
    with temp_dir("planner") as d:
        manifest = write_manifest(d, MANIFEST)
        manifests = load_manifest_files([manifest])
        per_step_base = None
        for n in SIZES:
            run = run_record("run_bench_planner")
            snapshot = RunSnapshot(run, tuple(build_records(n, run.run_id, manifests)))
            seconds, plan = time_planner(snapshot, manifests, reps)
            per_step = seconds / n
            counts = kinds(plan)
            note(f"planner {n // 1000}k: {dict(sorted(counts.items()))}, {len(plan.notes)} notes")
            assert counts["defer"] > 0 and counts["compensate"] > 0 and counts["unrecoverable"] > 0
            name = f"planner {n // 1000}k"
            if per_step_base is None:
                per_step_base = per_step
                results.append(Result(name, "plan_rollback, time per step", us(per_step), "", None, "(growth base)"))
            else:
                growth = per_step / per_step_base
                results.append(
                    Result(
                        name,
                        "plan_rollback, time per step",
                        us(per_step),
                        f"{us(per_step_base)} at 10k",
                        growth,
                        f"ratio <= {GROWTH_TARGET} (linear)",
                        growth <= GROWTH_TARGET,
                    )
                )
            if n == SIZES[-1]:
                results.append(
                    Result(
                        name,
                        "plan_rollback, whole run",
                        ms(seconds),
                        "",
                        None,
                        f"< {PLAN_TARGET_S:.0f} s",
                        seconds < PLAN_TARGET_S,
                    )
                )
                no_gc = median([time_without_gc(snapshot, manifests) for _ in range(reps)])
                results.append(Result(name, "plan_rollback, cyclic GC off", ms(no_gc), ms(seconds), no_gc / seconds))
        results += bench_snapshot_load(SIZES[-1], manifest, d, 1 if quick else 2)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, for a smoke test")
    args = parser.parse_args(argv)
    print_table(bench(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

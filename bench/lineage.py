"""What lineage costs: `run.call` of a tool whose entry declares resources against the same calls of one
that does not, and the plan of a scope of 1,000 runs x 100 steps (every step touching a resource, one
in ten shared with other runs), with a quarter of it to show the time grows linearly.

    python bench/lineage.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
from functools import partial

import reversi
from bench.common import Result, median, ms, print_table, temp_dir, timed, timed_calls, write_manifest
from bench.journal import noop
from reversi.core.models import EventType, Mode, NewEvent, RunRecord, Scope, StepRecord
from reversi.core.resources import resource_key
from reversi.core.scopes import Selection
from reversi.core.times import format_time
from reversi.engine.run import Run

MANIFEST = """\
version: 1
tools:
  inventory.reserve:
    compensation: {tool: inventory.release, args: {reservation: "$result.id"}}
  inventory.hold:
    resources: ["sku:${args.sku}", "reservation:${result.id}"]
    compensation: {tool: inventory.release, args: {reservation: "$result.id"}}
"""
CALL_TARGET = 1.1
PLAN_TARGET_S = 3.0
LINEAR_TARGET = 1.3  # the full scope's time per step against the quarter's


def _call(run: Run, tool: str, i: int) -> object:
    return run.call(tool, {"sku": f"sku-{i % 50}", "qty": i % 7 + 1}, noop)


def _calls(quick: bool) -> Result:
    batches, per = (4, 50) if quick else (10, 200)
    with temp_dir("reversi-bench-lineage-") as directory:
        manifest = write_manifest(directory, MANIFEST)
        ledgers = {kind: reversi.open(f"sqlite:///{directory}/{kind}.db", manifests=[manifest])
                   for kind in ("inventory.reserve", "inventory.hold")}
        runs = {kind: ledger.start_run(actor="bench") for kind, ledger in ledgers.items()}
        samples: dict[str, list[float]] = {kind: [] for kind in ledgers}
        for batch in range(batches):
            order = list(ledgers) if batch % 2 == 0 else list(reversed(ledgers))
            for kind in order:
                got, _ = timed_calls(partial(_call, runs[kind], kind), batch * per, per)
                samples[kind] += got
        for ledger in ledgers.values():
            ledger.close()
    base, with_resources = median(samples["inventory.reserve"]), median(samples["inventory.hold"])
    ratio = with_resources / base
    return Result("lineage", "run.call, resources declared (median)", ms(with_resources), ms(base), ratio,
                  f"<= {CALL_TARGET}x", ratio <= CALL_TARGET)


def _seed(ledger: reversi.Ledger, runs: int, steps: int) -> None:
    """`runs` runs of `steps` held SKUs each, written straight into the store (recording them one call at
    a time would take longer than the bench); their resources indexed as recording indexes them."""
    from datetime import UTC, datetime, timedelta

    secret = ledger.store.secret("masking")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for r in range(runs):
        run_id = f"run_{r:05d}"
        with ledger.store.write() as q:
            q.insert_run(RunRecord(run_id, "bench", Mode.OBSERVE, Scope("bench", "acme"), {}, format_time(start)))
            for i in range(steps):
                sku = f"shared-{i % 50}" if i % 10 == 0 else f"{run_id}-{i}"
                result = {"id": f"res_{r}_{i}"}
                q.insert_step(StepRecord(run_id, i, "inventory.hold", {"sku": sku}))
                q.append(run_id, [NewEvent(EventType.INTENDED, i, "bench", {"tool": "inventory.hold",
                                                                            "args": {"sku": sku}}),
                                  NewEvent(EventType.SUCCEEDED, i, "bench", {"result": result})])
                at = format_time(start + timedelta(seconds=r * steps + i))
                q.add_touches(run_id, i, at, [resource_key(secret, "acme", f"sku:{sku}"),
                                              resource_key(secret, "acme", f"reservation:{result['id']}")])


def _plan_time(runs: int, steps: int, rounds: int) -> float:
    with temp_dir("reversi-bench-lineage-") as directory, \
            reversi.open(f"sqlite:///{directory}/scope.db", manifests=[write_manifest(directory, MANIFEST)]) as ledger:
        _seed(ledger, runs, steps)
        samples = []
        for _ in range(rounds):
            seconds, plan = timed(partial(ledger.plan_scope, Selection(actor="bench")))
            assert len(plan.actions) == runs * steps and len(plan.run_ids) == runs
            samples.append(seconds)
    return median(samples)


def _plans(quick: bool) -> list[Result]:
    runs, steps, rounds = (100, 100, 2) if quick else (1_000, 100, 3)
    whole = _plan_time(runs, steps, rounds)
    quarter = _plan_time(runs // 4, steps, rounds)
    linear = (whole / runs) / (quarter / (runs // 4))
    return [
        Result("lineage", f"plan of a scope of {runs:,} runs x {steps} steps", ms(whole), "", None,
               f"<= {PLAN_TARGET_S:g} s", whole <= PLAN_TARGET_S),
        Result("lineage", "  per run, against a quarter of the scope", ms(whole / runs), ms(quarter / (runs // 4)),
               linear, f"<= {LINEAR_TARGET}x", linear <= LINEAR_TARGET),
    ]


def bench(quick: bool = False) -> list[Result]:
    """The recording line and the two planning lines."""
    return [_calls(quick), *_plans(quick)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print_table(bench(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

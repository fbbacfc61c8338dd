"""Concurrent compensations: a 500-step run whose every undo takes 50 ms (a remote API), rolled back one
step at a time and then, on a twin run, eight at once (`concurrency=8`). The reports must be the same.

The run mixes what agents do, in blocks of five: a repository, a file in it (`depends_on` the
repository), a charge, a job that `depends_on` both the charge and the file, and a read. Four of the
five need an undo, and a block's undos must go job, then file and charge, then repository.

    python bench/concurrent.py [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
from typing import Any

import reversi
from bench.common import Result, note, print_table, temp_dir, timed

STEPS = 500
QUICK_STEPS = 100
UNDO_S = 0.05
CONCURRENCY = 8
TARGET = 6.0  # at least this many times faster than one at a time

MANIFEST = """\
version: 1
tools:
  repo.create: {compensation: {tool: repo.delete, args: {name: "$args.name"}}}
  file.create: {compensation: {tool: file.delete, args: {path: "$args.path"}}}
  charge.create: {compensation: {tool: charge.refund, args: {id: "$result.id"}}}
  job.start: {compensation: {tool: job.cancel, args: {id: "$result.id"}}}
  charge.get: {effect: read}
"""


async def undo(call: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(UNDO_S)
    return {"undone": call["tool"]}


def record(run: reversi.Run, steps: int) -> None:
    def step(tool: str, args: dict[str, Any], result: Any, depends_on: tuple[int, ...] = ()) -> int:
        handle = run.begin(tool, args, depends_on=depends_on)
        handle.succeeded(result)
        return handle.index

    for block in range(steps // 5):
        repo = step("repo.create", {"name": f"r{block}"}, {"ok": True})
        file = step("file.create", {"path": f"r{block}/README"}, {"ok": True}, (repo,))
        charge = step("charge.create", {"amount": block}, {"id": f"ch_{block}"})
        step("job.start", {"n": block}, {"id": f"job_{block}"}, (charge, file))
        step("charge.get", {"id": f"ch_{block}"}, {"id": f"ch_{block}"})


def bench(quick: bool = False) -> list[Result]:
    steps = QUICK_STEPS if quick else STEPS
    with temp_dir("concurrent") as d:
        manifest = d / "manifest.yaml"
        manifest.write_text(MANIFEST)
        with reversi.open(f"sqlite:///{d / 'ledger.db'}", manifests=[str(manifest)]) as ledger:
            one, many = ledger.start_run(), ledger.start_run()
            record(one, steps)
            record(many, steps)
            note(f"concurrent: {steps} steps, one at a time ...")
            in_turn_s, in_turn = timed(lambda: one.rollback(compensate=undo))
            note(f"concurrent: {steps} steps, {CONCURRENCY} at once ...")
            at_once_s, at_once = timed(lambda: many.rollback(compensate=undo, concurrency=CONCURRENCY))
    same = at_once.to_dict() | {"run_id": in_turn.run_id} == in_turn.to_dict()
    speedup = in_turn_s / at_once_s
    return [
        Result("concurrent/sqlite", f"rollback {steps} steps, {UNDO_S * 1e3:.0f} ms undo, {CONCURRENCY} at once",
               f"{at_once_s:.2f} s", f"{in_turn_s:.2f} s one at a time", at_once_s / in_turn_s,
               f"≥ {TARGET:.0f}x faster, same report", speedup >= TARGET and same),
        Result("concurrent/sqlite", "same report as one at a time", "yes" if same else "NO"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps instead of {STEPS}")
    print_table(bench(parser.parse_args(argv).quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Hypothesis, against a model: random interleaved runs writing shared resources, random scopes of them,
random compensations that fail. Whatever happens, the rollback never undoes a step while a later step on
the same resource (in any run) still stands, never undoes a step twice, and what it leaves is what a
re-plan leaves: nothing it could still undo, and every step it held back is held back by one that stands.

Each example is a tenant of its own in the test's store (SQLite file or PostgreSQL schema), so lineage
never crosses examples.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reversi
from reversi.core.plan import ActionKind
from reversi.errors import ToolAnsweredError

MANIFEST = """\
version: 1
tools:
  w:
    resources: ["res:${args.r}"]
    compensation: {tool: undo, args: {r: "$args.r", n: "$args.n"}}
"""
RUNS, RESOURCES = 3, 3

steps_st = st.lists(st.tuples(st.integers(0, RUNS - 1), st.integers(0, RESOURCES - 1)), min_size=1, max_size=10)


@pytest.fixture(scope="module")
def counter() -> itertools.count[int]:
    return itertools.count()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps_st, failing=st.sets(st.integers(0, 9), max_size=3), scope=st.sampled_from(["all", "actor0", "half"]))
def test_the_rollback_follows_lineage_across_runs(
    db_url: str, tmp_path: Path, steps: list[tuple[int, int]], failing: set[int], scope: str,
) -> None:
    manifest = tmp_path / "w.yaml"
    manifest.write_text(MANIFEST)
    tenant = f"t{uuid.uuid4().hex[:12]}"
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        runs = [ledger.start_run(actor=f"actor{i}", tenant=tenant) for i in range(RUNS)]
        order: list[tuple[str, int, int]] = []  # (run, step, resource) in journal order
        for n, (run_index, resource) in enumerate(steps):
            run = runs[run_index]
            done = run.call("w", {"r": resource, "n": n}, lambda r, n: "ok")
            assert done == "ok"
            order.append((run.id, len(run.steps()) - 1, resource))
        number = {(run_id, step): n for n, (run_id, step, _) in enumerate(order)}
        undone: list[int] = []

        def compensate(call: dict[str, Any]) -> str:
            n = call["args"]["n"]
            if n in failing:
                raise ToolAnsweredError("refused")
            undone.append(n)
            return "undone"

        half = len(order) // 2  # "half": the steps journaled from the middle one on
        middle = next(s.at for r in runs for s in r.steps() if number[(r.id, s.index)] == half)
        selection = {"all": reversi.Selection(tenant=tenant),
                     "actor0": reversi.Selection(tenant=tenant, actor="actor0"),
                     "half": reversi.Selection(tenant=tenant, since=middle)}[scope]
        covered = {n for n, (run_id, _, _) in enumerate(order)
                   if (scope != "actor0" or run_id == runs[0].id) and (scope != "half" or n >= half)}
        ledger.rollback_scope(selection, compensate, retry={"attempts": 1})

        # Never twice: each step's undo took effect at most once, and the journal agrees.
        assert len(undone) == len(set(undone))
        statuses = {number[(r.id, s.index)]: s.status.value for r in runs for s in r.steps()}
        assert {n for n, status in statuses.items() if status == "compensated"} == set(undone)
        # Never under a standing dependent: when a step was undone, every later step on its resource was
        # undone already (before it), and none of them stood at the end.
        when = {n: i for i, n in enumerate(undone)}
        for n in undone:
            later = [m for m in range(n + 1, len(order)) if order[m][2] == order[n][2]]
            assert all(m in when and when[m] < when[n] for m in later), (n, later, undone)
        # Nothing undone outside the scope.
        assert set(undone) <= covered
        # What is left is what a re-plan leaves: nothing it could undo now, but the refused steps and
        # those the refused ones held back (a plan assumes every undo succeeds), and every step held back
        # has a later step on its resource that stands.
        plan = ledger.plan_scope(selection)
        assert {number[(r, a.step)] for r, a in plan.actions} <= covered
        for run_id, action in plan.actions:
            n = number[(run_id, action.step)]
            standing = [m for m in range(n + 1, len(order)) if order[m][2] == order[n][2]
                        and statuses[m] != "compensated"]
            assert action.kind in (ActionKind.COMPENSATE, ActionKind.DEFER, ActionKind.SKIP), action
            if action.kind is ActionKind.COMPENSATE:
                assert n in failing or standing, (n, action, undone)
            elif action.kind is ActionKind.DEFER:
                assert standing and n not in undone, (n, action)
            else:
                assert statuses[n] == "compensated" and n in covered, (n, action)

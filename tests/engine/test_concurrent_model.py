"""A model of the concurrent rollback: random dependency graphs, undos that fail, a process that dies
amid the undos and a rerun; never an undo while a step that depends on it stands, never a step undone
again once it is, and the end state a plain newest-first model predicts. On both back ends."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reversi
from reversi.core.models import StepStatus


class Died(BaseException):
    """The process dies here: nothing after it runs in it."""


@dataclass(frozen=True)
class Case:
    depends_on: list[list[int]]
    failing: frozenset[int]
    died_at: int | None  # the call the process dies in (None: it does not)
    yields: list[int]  # how often each undo lets the others run before it answers
    concurrency: int

    @property
    def dependents(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for step, targets in enumerate(self.depends_on):
            for target in targets:
                found.setdefault(target, []).append(step)
        return found

    def expected_undone(self) -> set[int]:
        """Newest first: a step is undone when its undo works and every step that depends on it is undone."""
        undone: set[int] = set()
        for step in reversed(range(len(self.depends_on))):
            if step not in self.failing and all(d in undone for d in self.dependents.get(step, ())):
                undone.add(step)
        return undone


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(2, 18))
    depends_on = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    return Case(
        depends_on,
        frozenset(draw(st.sets(st.integers(0, n - 1), max_size=n // 3))),
        draw(st.none() | st.integers(1, n)),
        draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
        draw(st.integers(2, 8)),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(case=cases())
def test_concurrent_rollbacks_keep_the_walks_promises(ledger: reversi.Ledger, case: Case) -> None:
    run = ledger.start_run()
    for step, targets in enumerate(case.depends_on):
        run.begin("jobs.start", {"n": step}, depends_on=targets).succeeded({"id": f"job_{step}"})
    dependents = case.dependents
    undone: set[int] = set()  # the steps whose undo took effect downstream
    broken: list[str] = []
    calls, rerun = 0, False

    async def undo(call: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        step = call["step"]
        standing = [d for d in dependents.get(step, ()) if d not in undone]
        if standing:
            broken.append(f"step {step} undone while {standing} stand")
        if run.step_state(step).status is StepStatus.COMPENSATED:
            broken.append(f"step {step} undone again after it was journaled compensated")
        calls += 1
        if calls == case.died_at and not rerun:
            raise Died()
        for _ in range(case.yields[step]):
            await asyncio.sleep(0)
        if step in case.failing:
            raise ConnectionError("downstream said 503")
        undone.add(step)
        return {"cancelled": call["args"]["job"]}

    with contextlib.suppress(Died):
        run.rollback(compensate=undo, concurrency=case.concurrency)
    rerun = True
    report = run.rollback(compensate=undo, concurrency=case.concurrency)

    assert broken == []
    expected = case.expected_undone()
    assert undone == expected
    assert set(report.compensated) | set(report.already_undone) == expected
    tried = {s for s in range(len(case.depends_on)) if all(d in expected for d in dependents.get(s, ()))}
    assert {f.step for f in report.failed} == tried - expected
    assert {d.step for d in report.deferred} == set(range(len(case.depends_on))) - tried
    statuses = [s.status for s in run.steps()]
    for step, status in enumerate(statuses):
        want = (StepStatus.COMPENSATED if step in expected else StepStatus.COMPENSATION_FAILED if step in tried
                else StepStatus.SUCCEEDED)
        assert status is want, (step, status)


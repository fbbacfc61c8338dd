"""Retention against a plain model, on both stores: random runs with random step histories, approvals,
rollback jobs and leases, opened and last written at random times, pruned by a random window on a
controlled clock. The model says which runs may go; a dry run changes nothing and names exactly
those; the prune deletes exactly those, with every row of them, writes each of their events to the
export first, and leaves every other run exactly as it was.

The model is written from the rule as docs/operations.md states it, not from the code: a run may go
when it was opened and last written before the cutoff, every step's last status is `failed`,
`compensated`, or `succeeded` for a tool that needs no undo (a read, an idempotent tool), and no
approval is pending, no rollback job queued or running, no rollback lease held.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.store_state import store_state

import reversi
from reversi.core.json_values import compact
from reversi.core.models import ApprovalKind, EventType, Mode, NewEvent, RunRecord, Scope, StepRecord
from reversi.core.times import format_time
from reversi.store.approvals import ApprovalRow
from reversi.store.jobs import JobRow
from reversi.store.retention import RUN_TABLES

NOW = datetime(2031, 6, 1, 12, tzinfo=UTC)  # the clock retention is given; the store's times are set to fit
# Each tool of the suite's manifest (tests/conftest.py), by what its plan makes of a step that succeeded.
NO_UNDO = {"stripe.get_charge": "read", "crm.upsert_contact": "idempotent"}
TOOLS = ["stripe.get_charge", "crm.upsert_contact", "stripe.create_charge", "email.send", "x.unmanifested"]
STATUS_EVENTS = ["succeeded", "failed", "uncertain", "resolved:succeeded", "resolved:failed", "compensating",
                 "compensating:claimed", "compensated", "compensation_failed"]


@dataclass(frozen=True)
class Step:
    tool: str
    history: tuple[str, ...]  # after `intended`

    def last_status(self) -> str:
        status = "intended"
        for event in self.history:
            status = event.split(":")[1] if event.startswith("resolved") else event.split(":")[0]
        return status


@dataclass(frozen=True)
class Run:
    opened_h: int  # hours before NOW
    written_h: int  # hours before NOW of its last event (never before it was opened)
    steps: tuple[Step, ...]
    approval: str  # none, pending, granted, denied
    job: str  # none, queued, running, done
    lease: str  # none, held, released, expired
    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex}")

    def may_go(self, window_h: int) -> bool:
        settled = all(s.last_status() in ("failed", "compensated")
                      or (s.last_status() == "succeeded" and s.tool in NO_UNDO) for s in self.steps)
        return (self.opened_h > window_h and self.written_h > window_h and settled
                and self.approval != "pending" and self.job not in ("queued", "running") and self.lease != "held")


any_steps = st.builds(Step, st.sampled_from(TOOLS), st.lists(st.sampled_from(STATUS_EVENTS), max_size=3).map(tuple))
settled_steps = st.one_of(  # a history that ends settled, so that whole runs may go often
    st.builds(Step, st.sampled_from(TOOLS), st.sampled_from([("failed",), ("uncertain", "resolved:failed"),
                                                             ("succeeded", "compensating", "compensated")])),
    st.builds(Step, st.sampled_from(sorted(NO_UNDO)), st.sampled_from([("succeeded",), ("resolved:succeeded",)])))
# What else a run may have: mostly nothing, else one thing (which alone may keep it).
EXTRAS = [{}, {}, {}, *({name: value} for name, values in (("approval", ["pending", "granted", "denied"]),
                                                            ("job", ["queued", "running", "done"]),
                                                            ("lease", ["held", "released", "expired"]))
                         for value in values)]


@st.composite
def runs(draw: st.DrawFn) -> Run:
    opened = draw(st.integers(0, 48))
    written = draw(st.integers(0, opened))
    found = draw(st.lists(settled_steps if draw(st.booleans()) else any_steps, max_size=4))
    extra = {"approval": "none", "job": "none", "lease": "none"} | draw(st.sampled_from(EXTRAS))
    return Run(opened, written, tuple(found), **extra)


def _at(hours: int) -> str:
    return format_time(NOW - timedelta(hours=hours))


def _events_of(step: int, history: tuple[str, ...]) -> Iterator[NewEvent]:
    for name in history:
        kind, _, detail = name.partition(":")
        data: dict[str, Any] = {}
        if kind == "succeeded":
            data = {"result": {"id": f"ch_{step}"}}
        elif kind in ("failed", "uncertain", "compensation_failed"):
            data = {"error": "it broke"}
        elif kind == "resolved":
            data = {"status": detail, "note": "checked"}
        elif kind == "compensating":
            data = {"attempt": 1} | ({"worker": "w1", "claim_until": "2099-01-01T00:00:00.000000Z"} if detail else {})
        yield NewEvent(EventType(kind), step, "seed", data)


def seed(ledger: reversi.Ledger, run: Run) -> None:
    with ledger.store.write() as q:
        q.insert_run(RunRecord(run.run_id, "local", Mode.OBSERVE, Scope("agent", "acme"), {}, _at(run.opened_h)))
        q.append(run.run_id, [NewEvent(EventType.RUN_OPENED, None, "agent", {})])
        for index, step in enumerate(run.steps):
            q.insert_step(StepRecord(run.run_id, index, step.tool, {"n": index}))
            q.append(run.run_id, [NewEvent(EventType.INTENDED, index, "agent", {"tool": step.tool}),
                                  *_events_of(index, step.history)])
        if run.approval != "none":
            approval_id = "apr_" + uuid.uuid4().hex
            q.insert_approval(ApprovalRow(approval_id, run.run_id, None, ApprovalKind.CALL, "payments.wire", {},
                                          "digest", "agent", _at(run.written_h)))
            decided = {"granted": [EventType.APPROVAL_GRANTED], "denied": [EventType.APPROVAL_DENIED]}
            q.append(run.run_id, [NewEvent(kind, None, "op", {"approval_id": approval_id})
                                  for kind in [EventType.APPROVAL_REQUESTED, *decided.get(run.approval, [])]])
        if run.job != "none":
            q.insert_job(JobRow(f"job_{uuid.uuid4().hex}", run.run_id, run.job, "op", False, 1, _at(run.written_h)))
        if run.lease != "none":
            q.take_lease(run.run_id, None, 1, "seed", 3600 if run.lease == "held" else -3600)
            if run.lease == "released":
                q.release_lease(run.run_id, 1)
        q.execute("UPDATE events SET at = ? WHERE run_id = ?", (_at(run.written_h), run.run_id))


def rows_of(ledger: reversi.Ledger, run_ids: list[str]) -> dict[str, list[str]]:
    """Every row of these runs in every table of runs, in a fixed order."""
    found: dict[str, list[str]] = {}
    with ledger.store.read() as q:
        for table in RUN_TABLES:
            rows = [repr(r) for run_id in run_ids
                    for r in q.execute(f"SELECT * FROM {table} WHERE run_id = ?", (run_id,)).fetchall()]
            found[table] = sorted(rows)
    return found


def _empty(ledger: reversi.Ledger) -> None:
    with ledger.store.write() as q:
        for table in RUN_TABLES:
            q.execute(f"DELETE FROM {table}")


@pytest.fixture
def store(db_url: str, manifest: Path) -> Iterator[reversi.Ledger]:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        yield ledger


@fuzz_settings(ci=40)
@given(found=st.lists(runs(), max_size=8), window_h=st.integers(0, 50))
def test_prune_deletes_exactly_the_runs_the_model_lets_go_and_leaves_the_others_as_they_were(
        store: reversi.Ledger, tmp_path: Path, found: list[Run], window_h: int) -> None:
    _empty(store)
    for run in found:
        seed(store, run)
    tried("retention", len(found))
    going = {r.run_id for r in found if r.may_go(window_h)}
    staying = [r.run_id for r in found if r.run_id not in going]
    with store.store.read() as q:
        exported = {compact(e.to_dict()) for run_id in going for e in q.run_events(run_id)}
        snapshots = {run_id: q.snapshot(run_id) for run_id in staying}
    rows, before = rows_of(store, staying), store_state(store)

    window = timedelta(hours=window_h)
    dry = list(store.pruning(window, now=NOW, dry_run=True).run())
    assert store_state(store) == before
    assert {o.run.run_id for o in dry if o.pruned} == going
    assert {o.run.run_id for o in dry if not o.pruned} == {r.run_id for r in found if r.opened_h > window_h} - going

    export = tmp_path / f"export-{uuid.uuid4().hex}.jsonl"
    done = list(store.pruning(window, now=NOW, export=export).run())
    assert {o.run.run_id for o in done if o.pruned} == going
    assert rows_of(store, list(going)) == {table: [] for table in RUN_TABLES}
    assert rows_of(store, staying) == rows
    with store.store.read() as q:
        assert {run_id: q.snapshot(run_id) for run_id in staying} == snapshots
    assert {json.dumps(json.loads(line), separators=(",", ":")) for line in export.read_text().splitlines()} \
        == {json.dumps(json.loads(line), separators=(",", ":")) for line in exported}

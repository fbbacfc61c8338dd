"""The fold a snapshot makes of many steps: the same states as `derive_step`, with the data it never
reads left undecoded, and the JSON it decodes read as `json.loads` reads it."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reversi.core.gc_pause import gc_paused
from reversi.core.json_values import compact, loads
from reversi.core.models import NO_DATA, Event, EventType, StepRecord, data_read, derive_step, derive_step_rows

RECORD = StepRecord("run_fold", 0, "crm.create", {"email": "a@example.com"})

# Data an event of each type may carry: keys derive_step reads, keys it does not, and the read keys
# nested where they mean nothing (inside arguments).
_VALUES = st.one_of(st.none(), st.integers(0, 3), st.text(max_size=5), st.just({"call_id": "nested", "before": 1}))
_KEYS = st.sampled_from(["before", "before_absent", "before_text", "call_id", "declared_undo", "args", "tool",
                         "result", "text", "error", "attempt", "kind", "approval_id", "worker", "claim_until",
                         "status", "follow_up_id", "part"])


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    kinds = draw(st.lists(st.sampled_from(list(EventType)), max_size=8))
    found = []
    for seq, kind in enumerate(kinds):
        data: dict[str, Any] = draw(st.dictionaries(_KEYS, _VALUES, max_size=4))
        if kind is EventType.RESOLVED:
            data["status"] = draw(st.sampled_from(["succeeded", "failed", "compensated"]))
        if kind is EventType.COMPENSATING:
            data["attempt"] = draw(st.integers(1, 3))
            if "claim_until" in data:
                data["worker"] = "w"
        if kind is EventType.APPROVAL_REQUESTED:
            data["kind"] = draw(st.sampled_from(["compensation", "call"]))
            data["approval_id"] = draw(st.sampled_from(["apr_1", "apr_2"]))
        if kind in (EventType.APPROVAL_GRANTED, EventType.APPROVAL_DENIED):
            data["approval_id"] = draw(st.sampled_from(["apr_1", "apr_2"]))
        found.append(Event("run_fold", seq, 0, kind.value, f"2026-01-01T00:00:0{seq % 10}Z", f"actor{seq}", data))
    return found


@settings(max_examples=300, deadline=None)
@given(events())
def test_folding_only_the_data_read_gives_the_state_derive_step_gives(found: list[Event]) -> None:
    rows = [(ev.type, ev.at, ev.actor, loads(compact(dict(ev.data))) if data_read(ev.type, compact(dict(ev.data)))
             else NO_DATA) for ev in found]
    assert derive_step_rows(RECORD, rows) == derive_step(RECORD, found)


def test_an_intended_event_naming_none_of_the_keys_read_is_not_decoded() -> None:
    assert not data_read("intended", compact({"tool": "t", "args": {"email": "x"}, "depends_on": []}))
    assert data_read("intended", compact({"tool": "t", "args": {"call_id": 1}}))  # nested: decoded, to be sure
    assert data_read("intended", compact({"tool": "t", "sealed": {"fields": ["args", "before"], "value": "x"}}))
    assert not data_read("compensated", compact({"result": 1}))
    assert data_read("succeeded", compact({"result": 1}))


@pytest.mark.parametrize("text", ['{"a":1}', ' {"a": 1} ', "[1,2]", '"x"', "NaN", "1e400", '{"a":1}x', "", "{",
                                  '{"a":1} ', "\ufeff{}", '{"a":"\\ud800"}'])
def test_loads_reads_and_refuses_as_json_loads_does(text: str) -> None:
    def outcome(read: Any) -> tuple[str, Any]:
        try:
            value = read(text)
        except ValueError as exc:
            return type(exc).__name__, str(exc)
        return "value", "NaN" if value != value else value

    assert outcome(loads) == outcome(json.loads)


def test_what_a_paused_block_kept_is_not_walked_by_the_next_young_collection() -> None:
    gc.collect()
    with gc_paused():
        kept = [[i] for i in range(50_000)]
    assert gc.get_count()[0] < 1_000  # no collection is due for them
    assert gc.isenabled()
    assert len(kept) == 50_000


def test_a_paused_block_leaves_what_another_froze_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            _ = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_state_made_in_bulk_is_the_state_made_as_usual() -> None:
    from reversi.core.models import Claim, StepState, StepStatus, step_record

    values = ("run_fold", 3, "crm.create", {"a": [1]}, (1, 2), True, "sha256:x", "dup")
    records = [step_record(*values), step_record(*values)]  # the first is made as usual, the next in bulk
    assert all(r == StepRecord(*values) and vars(r) == vars(StepRecord(*values)) for r in records)
    assert repr(records[1]) == repr(StepRecord(*values))
    with pytest.raises(AttributeError):
        records[1].step = 4  # type: ignore[misc]  # still frozen
    events = [Event("run_fold", 0, 3, "intended", "t0", "a", {"call_id": "c"}),
              Event("run_fold", 1, 3, "compensating", "t1", "a", {"attempt": 2, "worker": "w", "claim_until": "u"})]
    for _ in range(2):
        state = derive_step(records[1], events)
        assert state == StepState(records[1], StepStatus.COMPENSATING, attempts=2, at="t0", call_id="c",
                                  claim=Claim("w", "u"))
        assert set(vars(state)) == {f for f in StepState.__dataclass_fields__}

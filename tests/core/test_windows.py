"""Undo windows (issue 30): `undo_until`, `undo_window` and `undo_from` in a manifest, the moments an API
gives (RFC 3339, seconds since 1970), what a plan made at a given moment says of each step, and what
`manifest check` says of each misuse, at its line. The moment is always given: no test waits."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reversi.core.manifest import ManifestSet
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.models import Event, Mode, RunRecord, RunSnapshot, Scope, StepRecord, derive_step
from reversi.core.planner import plan_rollback
from reversi.core.windows import moment, time_left
from reversi.errors import WindowUnknown

T = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
MANIFEST = """
version: 1
tools:
  stripe.create_charge:
    undo_window: 180d
    undo_from: "$result.created"
    compensation: {tool: stripe.refund, args: {charge: "$result.id"}}
  slack.post_message:
    undo_window: 24h
    compensation: {tool: slack.delete_message, args: {ts: "$result.ts"}}
  bank.transfer:
    undo_until: "$result.recallable_until"
    compensation: {tool: bank.recall, args: {id: "$result.id"}}
"""


def _snapshot(*steps: tuple[str, Any, str]) -> RunSnapshot:
    run = RunRecord("run_w", "p", Mode.OBSERVE, Scope("ann", "", ""), {}, "2026-01-01T00:00:00Z")
    states = []
    for index, (tool, result, at) in enumerate(steps):
        events = [Event("run_w", 2 * index, index, "intended", at, "ann", {"tool": tool, "args": {}}),
                  Event("run_w", 2 * index + 1, index, "succeeded", at, "ann", {"result": result})]
        states.append(derive_step(StepRecord("run_w", index, tool, {}), events))
    return RunSnapshot(run, tuple(states))


def _plan(snapshot: RunSnapshot, now: datetime | None) -> dict[int, Any]:
    manifests = ManifestSet(parse_manifest(MANIFEST, "m.yaml")[0])
    return {a.step: a for a in plan_rollback(snapshot, manifests, now=now).actions}


def test_a_plan_says_when_each_window_closes_and_how_long_is_left() -> None:
    created = int((T - timedelta(days=179)).timestamp())  # Stripe gives seconds since 1970
    snapshot = _snapshot(
        ("stripe.create_charge", {"id": "ch_1", "created": created}, "2026-06-01T00:00:00Z"),
        ("slack.post_message", {"ts": "1.2"}, "2026-12-05T10:00:00.000000Z"),
        ("bank.transfer", {"id": "tr_1", "recallable_until": "2026-12-05T12:30:00+01:00"}, "2026-12-05T11:00:00Z"),
        ("bank.transfer", {"id": "tr_2", "recallable_until": "2026-12-07T12:00:00Z"}, "2026-12-05T11:00:00Z"),
    )
    actions = _plan(snapshot, T)
    assert actions[0].describe() == ("compensate -> stripe.refund  "
                                     "(undo window closes 2026-12-06T12:00:00.000000Z, in 1d)")
    assert actions[0].to_dict()["undo_until"] == "2026-12-06T12:00:00.000000Z"
    assert actions[1].describe().endswith("(undo window closes 2026-12-06T10:00:00.000000Z, in 22h)")
    # 12:30 at +01:00 is 11:30 UTC: closed half an hour before the plan
    assert (actions[2].kind.value, actions[2].reason) == (
        "unrecoverable", "the undo window closed at 2026-12-05T11:30:00.000000Z")
    assert actions[3].describe().endswith("in 2d)")
    # the same run a year on: every window closed, and the plan says when
    later = _plan(snapshot, T + timedelta(days=365))
    assert {a.kind.value for a in later.values()} == {"unrecoverable"}
    assert later[1].reason == "the undo window closed at 2026-12-06T10:00:00.000000Z"
    # with no moment given, windows are shown and nothing is judged closed
    shown = _plan(snapshot, None)
    assert shown[2].kind.value == "compensate" and shown[2].describe().endswith(
        "(undo window closes 2026-12-05T11:30:00.000000Z)")


def test_a_window_whose_moment_cannot_be_read_is_said_and_the_undo_still_planned() -> None:
    snapshot = _snapshot(("bank.transfer", {"id": "tr_1"}, "2026-12-05T11:00:00Z"),
                         ("bank.transfer", {"id": "tr_2", "recallable_until": "tomorrow"}, "2026-12-05T11:00:00Z"),
                         ("stripe.create_charge", {"id": "ch", "created": True}, "2026-12-05T11:00:00Z"))
    actions = _plan(snapshot, T)
    assert actions[0].describe().endswith("(its undo window is unknown: $result.recallable_until names nothing)")
    assert actions[0].to_dict()["undo_window_unknown"] == "$result.recallable_until names nothing"
    # the value is the agent's: it is not quoted back, the reference is
    assert actions[1].describe().endswith("(its undo window is unknown: $result.recallable_until: not an RFC 3339 "
                                          "time)")
    assert "got bool" in actions[2].describe()


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-12-05T12:00:00Z", T), ("2026-12-05T13:00:00+01:00", T), ("2026-12-05T12:00:00", T),
    (T.timestamp(), T), (int(T.timestamp()), T),
])
def test_moments_are_read_as_apis_give_them(value: Any, expected: datetime) -> None:
    assert moment(value) == expected


@pytest.mark.parametrize("value", ["", "soon", None, [], {}, True, float("nan"), float("inf"), 10**20, "9" * 400,
                                   "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00", -10**12])
def test_what_is_no_moment_is_said_so(value: Any) -> None:
    with pytest.raises(WindowUnknown):
        moment(value)


def test_time_left_is_said_in_its_two_largest_units() -> None:
    assert [time_left(T + d, T) for d in (timedelta(days=3, hours=4, minutes=5), timedelta(hours=5, minutes=2),
                                           timedelta(minutes=12), timedelta(seconds=40), timedelta(0),
                                           -timedelta(hours=1))] == ["3d 4h", "5h 2m", "12m", "40s", "0s", "0s"]


def _problems(body: str) -> list[str]:
    text = "version: 1\ntools:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    return [str(p) for p in parse_manifest(text, "m.yaml")[1]]


@pytest.mark.parametrize(("body", "said"), [
    ("x:\n  undo_until: $result.a\n  undo_window: 1d\n  irreversible: true\n", "m.yaml:4: undo_until: give the "
     "moment the undo stops being possible, or undo_window"),
    ("x:\n  undo_from: $result.a\n  irreversible: true\n", "m.yaml:4: undo_from: needs undo_window"),
    ("x:\n  undo_window: soon\n  irreversible: true\n", "m.yaml:4: undo_window 'soon': expected a duration"),
    ("x:\n  undo_window: 0d\n  irreversible: true\n", "m.yaml:4: undo_window: expected a length longer than 0"),
    ("x:\n  undo_window: 99999999999999w\n  irreversible: true\n", "too long to be a duration"),
    ("x:\n  undo_until: 3\n  irreversible: true\n", "m.yaml:4: undo_until: expected a reference naming a time"),
    ("x:\n  undo_until: $nothing.here\n  irreversible: true\n", "m.yaml:4:"),
])
def test_each_misuse_of_a_window_is_said_at_its_line(body: str, said: str) -> None:
    found = _problems(body)
    assert any(said in p for p in found), found


def test_a_moment_at_the_calendars_edge_leaves_the_window_unknown_not_the_run_unplannable() -> None:
    snapshot = _snapshot(("bank.transfer", {"id": "a", "recallable_until": "9999-12-31T23:00:00-05:00"}, "t"),
                         ("bank.transfer", {"id": "b", "recallable_until": "2099-01-01T00:00:00Z"}, "t"))
    actions = _plan(snapshot, T)
    assert actions[0].describe().endswith("its undo window is unknown: $result.recallable_until: a time past the "
                                          "calendar's edge)")
    assert actions[1].kind.value == "compensate"


def test_an_undo_begun_before_its_window_closed_is_still_planned_so_it_is_read_back_first() -> None:
    run = RunRecord("run_w", "p", Mode.OBSERVE, Scope("ann", "", ""), {}, "2026-01-01T00:00:00Z")
    result = {"id": "tr", "recallable_until": "2026-12-05T11:00:00Z"}
    events = [Event("run_w", 0, 0, "intended", "t", "ann", {"tool": "bank.transfer", "args": {}}),
              Event("run_w", 1, 0, "succeeded", "t", "ann", {"result": result}),
              Event("run_w", 2, 0, "compensating", "t", "ann", {"tool": "bank.recall", "attempt": 1})]
    begun = RunSnapshot(run, (derive_step(StepRecord("run_w", 0, "bank.transfer", {}), events),))
    assert _plan(begun, T)[0].kind.value == "compensate"

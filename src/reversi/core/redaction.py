"""What a person is shown of a run: its snapshot, events, plan, approvals and reports with every
sensitive value masked (`reversi.core.sensitive`). Pure: no I/O.

Every surface (the CLI's text and JSON, `export`, the HTTP API, the console, the gateway's operator
tools) shows records through these functions; the journal itself keeps the values, for the undo.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar, cast

from reversi.core.follow_ups import FollowUpState
from reversi.core.json_values import JSONView, LooseJSON
from reversi.core.models import Event, EventType, RunSnapshot, StepState
from reversi.core.plan import Action, Plan
from reversi.core.probes import Probed
from reversi.core.scopes import ScopePlan
from reversi.core.sensitive import Masker
from reversi.core.standing import RunStanding

__all__ = ["approval_args", "events", "learn", "plan", "report", "scope_plan", "snapshot", "standing", "text"]


def learn(masker: Masker, steps: Iterable[StepState]) -> Masker:
    """Teach `masker` the sensitive values of these steps (so text quoting them is masked); returns it."""
    for step in steps:
        masker.learn(step.tool, step.args, step.result if step.has_result else None)
    return masker


def _step(masker: Masker, step: StepState) -> StepState:
    args, result = masker.call(step.tool, step.args, step.result if step.has_result else None)
    return replace(
        step, record=replace(step.record, args=args), result=result if step.has_result else step.result,
        error=_maybe(masker, step.error), last_error=_maybe(masker, step.last_error),
        before=masker.value(step.before) if step.has_before else step.before,
        before_absent=_maybe(masker, step.before_absent),
        result_text=_maybe(masker, step.result_text), before_text=_maybe(masker, step.before_text),
    )


def _maybe(masker: Masker, value: str | None) -> str | None:
    return masker.text(value) if value else value


def snapshot(masker: Masker, snap: RunSnapshot) -> RunSnapshot:
    """The snapshot with each step's arguments, result, errors and capture masked."""
    learn(masker, snap.steps)
    return RunSnapshot(snap.run, tuple(_step(masker, s) for s in snap.steps))


Tools = dict[tuple[str | None, int], str]


def events(masker: Masker, found: Iterable[Event], tools: Tools | None = None) -> Iterator[Event]:
    """The events with their data masked: a call's arguments and result by its tool's paths (`tools`:
    each (run, step)'s tool, completed from the `intended` events met), everything by name and text."""
    tools = {} if tools is None else tools
    for event in found:
        data = dict(event.data)
        key = (event.run_id, event.step) if event.step is not None else None
        if event.type == EventType.INTENDED and key is not None and isinstance(data.get("tool"), str):
            tools[key] = data["tool"]
        tool = tools.get(key, "") if key is not None else ""
        if event.type == EventType.INTENDED and "args" in data:
            data["args"] = masker.call(tool, data["args"])[0]
        elif event.type == EventType.SUCCEEDED and "result" in data:
            data["result"] = masker.call(tool, None, data["result"])[1]
        yield replace(event, data=masker.value(data))


def _action(masker: Masker, action: Action) -> Action:
    comp = action.compensation
    if comp is not None:
        comp = replace(comp, args=masker.value(comp.args), chosen_because=_maybe(masker, comp.chosen_because),
                       then=tuple((tool, masker.value(args)) for tool, args in comp.then))
    others = tuple(replace(d, resource=masker.text(d.resource)) for d in action.blocked_by_runs)
    return replace(action, compensation=comp, reason=_maybe(masker, action.reason), blocked_by_runs=others,
                   last_failure=_maybe(masker, action.last_failure))


def plan(masker: Masker, found: Plan) -> Plan:
    """The plan with each compensation's arguments and each reason masked."""
    return replace(found, actions=tuple(_action(masker, a) for a in found.actions),
                   notes=tuple(masker.text(n) for n in found.notes))


def scope_plan(masker: Masker, found: ScopePlan) -> ScopePlan:
    """A plan of many runs with each compensation's arguments and each reason masked."""
    return replace(found, plans=tuple(plan(masker, p) for p in found.plans),
                   actions=tuple((run, _action(masker, a)) for run, a in found.actions))


def standing(masker: Masker, found: RunStanding) -> RunStanding:
    """Where a run stands, with the reasons and errors masked."""
    return replace(found, steps=tuple(replace(s, remains=_maybe(masker, s.remains),
                                              last_error=_maybe(masker, s.last_error)) for s in found.steps))


def follow_up(masker: Masker, found: FollowUpState) -> FollowUpState:
    """A follow-up with its texts (built from the call's values) and its action's arguments masked."""
    action = masker.value(dict(found.action)) if found.action is not None else None
    return replace(found, title=masker.text(found.title), text=masker.text(found.text), why=masker.text(found.why),
                   note=_maybe(masker, found.note), action=action)


def probed(masker: Masker, found: Probed) -> Probed:
    """What a probe said of a step, its reason (a reader's error may quote a credential) masked."""
    return replace(found, why=masker.text(found.why))


def approval_args(masker: Masker, tool: str, args: JSONView) -> LooseJSON:
    """An approval's call arguments, masked (a compensation's are masked by name and text only)."""
    return masker.call(tool, args)[0]


Shown = TypeVar("Shown", bound=Mapping[str, LooseJSON])


def report(masker: Masker, shown: Shown) -> Shown:
    """A rollback report's JSON (errors, arguments, read-backs), or a job's with its report, masked: the
    same shape, its values masked."""
    masked = masker.value(dict(shown))
    assert isinstance(masked, dict)
    return cast(Shown, masked)


def text(masker: Masker, lines: Sequence[str]) -> list[str]:
    """Lines of text, masked."""
    return [masker.text(line) for line in lines]

"""The read a manifest entry makes before each call (`capture`), whose answer `$before` names.

    captured = await take_capture(entry, run, args, read)   # None: the entry captures nothing now

`read(tool, arguments)` is the caller's reader (the gateway's upstream, `run.call`'s `capture=`); it may
be async, and raises `ToolAnsweredError` for the read tool's own error answer. The answer is journaled
in the `intended` event's data (`before`, or `before_absent` with the error that said nothing was
there), so it is derived from events like everything else. A capture that cannot be made raises
`CaptureFailed`: the caller journals it as `refused` and makes no call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from reversi.core.answers import TextAnswer
from reversi.core.expect import unmet_condition
from reversi.core.json_values import JSON, JSONObject, JSONView, LooseJSON, checked_arguments, to_json, valid_text
from reversi.core.manifest import ToolEntry
from reversi.core.models import RunRecord
from reversi.core.references import ReferenceContext, RunContext, reference_roots, resolve
from reversi.engine.rollback import ReadBack
from reversi.errors import CaptureFailed, MissingReference, ToolAnsweredError


@dataclass(frozen=True)
class Captured:
    """What a capture read: `value`, or nothing (`absent`, the error answer that said so)."""

    tool: str
    args: LooseJSON  # resolved from the capture's template
    value: JSON = None
    absent: str | None = None
    text: str | None = None  # the answer's text as it came, when it was read as JSON

    @classmethod
    def supplied(cls, value: object) -> Captured:
        """What the caller read before the call itself (`run.begin(before=...)`, HTTP `before`)."""
        return cls("", None, checked_arguments(value, "before"))

    def journal(self) -> JSONObject:
        """The fields of the `intended` event's data."""
        said: JSONObject = {"before_absent": self.absent} if self.absent is not None else {"before": self.value}
        text = {"before_text": valid_text(self.text)} if self.text is not None else {}
        return ({"capture": {"tool": self.tool, "args": self.args}} if self.tool else {}) | said | text


def call_context(run: RunRecord, args: JSONView) -> ReferenceContext:
    """What a template resolved before the call may name: its arguments and its run."""
    scope = run.scope
    return ReferenceContext(args=args, result=None, run=RunContext(run.run_id, scope.actor, scope.tenant,
                                                                    scope.environment), step=-1)


def needs_capture(entry: ToolEntry | None, run: RunRecord, args: JSONView) -> bool:
    """Whether a call must be captured first: its entry has a capture, and the call is not one its
    `read_when` already shows changes nothing (a dry run), judged on its arguments alone."""
    if entry is None or entry.capture is None:
        return False
    if not entry.read_when or "before" in reference_roots([*entry.read_when, *entry.read_when.values()]):
        return True
    return unmet_condition(entry.read_when, call_context(run, args)) is not None


async def take_capture(
    entry: ToolEntry | None, run: RunRecord, args: JSONView, read: ReadBack,
    stopped: Callable[[], Awaitable[bool]] | None = None,
) -> Captured | None:
    """Make the entry's capture for a call of `run` with `args`; None when it needs none, or when
    `stopped()` says a halt or the kill switch will refuse the call anyway (nothing is read then).

    Raises:
        CaptureFailed: its arguments name nothing in the call, or the read failed or answered an error
            that `absent_on_error` does not cover (a timeout included).
    """
    if not needs_capture(entry, run, args) or (stopped is not None and await stopped()):
        return None
    assert entry is not None and entry.capture is not None
    capture = entry.capture
    try:
        arguments = resolve(dict(capture.args), call_context(run, args))
    except MissingReference as missing:
        raise CaptureFailed(f"capture {capture.tool} before {entry.pattern}: {missing.ref} names nothing") from None
    try:
        answer = read(capture.tool, arguments)
        if inspect.isawaitable(answer):
            answer = await answer
    except ToolAnsweredError as exc:
        if capture.absent_on_error and capture.absent_on_error in exc.message:
            return Captured(capture.tool, arguments, absent=exc.message)
        raise CaptureFailed(f"capture {capture.tool} answered an error: {exc.message}") from None
    except Exception as exc:
        raise CaptureFailed(f"capture {capture.tool} failed: {str(exc) or type(exc).__name__}") from None
    if isinstance(answer, TextAnswer):
        return Captured(capture.tool, arguments, value=to_json(answer.value), text=answer.text)
    return Captured(capture.tool, arguments, value=to_json(answer))

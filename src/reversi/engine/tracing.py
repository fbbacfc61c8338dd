"""OpenTelemetry spans for recorded calls, refusals, rollbacks and compensation attempts.

Reversi never imports OpenTelemetry itself: the hooks here only act once the application has imported
`opentelemetry.trace` (the `otel` extra), and are no-ops before. Without it there is no tracer provider
to send spans to and no current span to join, so nothing is lost. Spans start in the caller's current
context, so a call's span is a child of the agent's own; the trace id is journaled with the step
(`trace_id`, `span_id` in the `intended` event's data) to go from a trace to the run and back.

Span attributes: `reversi.run_id`, `reversi.step`, `reversi.tool`, `reversi.outcome` (the step's
status, `refused`, `compensated`, `compensation_failed`, or a rollback's `complete`/`incomplete`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from reversi.errors import Refused

RUN_ID = "reversi.run_id"
STEP = "reversi.step"
TOOL = "reversi.tool"
OUTCOME = "reversi.outcome"


@dataclass
class _Call:
    span: Any
    run_id: str
    step: int | None = None


_CALL: ContextVar[_Call | None] = ContextVar("reversi_call_span", default=None)
_REMOTE: ContextVar[dict[str, str] | None] = ContextVar("reversi_remote_parent", default=None)
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_FRAMEWORK_ID = re.compile(r"[A-Za-z][A-Za-z0-9]{0,15}_[A-Za-z0-9]{8,64}")  # `trace_<hex>`, `span_<hex>`


def _api() -> Any | None:
    """The `opentelemetry.trace` module when the application has imported it, else None."""
    return sys.modules.get("opentelemetry.trace")


@contextmanager
def call_span(run_id: str, tool: str) -> Iterator[None]:
    """A span around one recorded call, current while the call runs; a refusal ends it `refused`."""
    api = _api()
    if api is None:
        yield
        return
    attributes = {RUN_ID: run_id, TOOL: tool}
    with api.get_tracer("reversi").start_as_current_span(f"reversi.call {tool}", attributes=attributes) as span:
        token = _CALL.set(_Call(span, run_id))
        try:
            yield
        except Refused as exc:
            span.set_attribute(OUTCOME, "refused")
            span.set_attribute("reversi.refusal", exc.code)
            raise
        finally:
            _CALL.reset(token)


def began(run_id: str, step: int) -> None:
    """The current call span's call was journaled `intended` as `step`."""
    call = _CALL.get()
    if call is not None and call.run_id == run_id and call.step is None:
        call.step = step
        call.span.set_attribute(STEP, step)


def ended(run_id: str, step: int, outcome: str) -> None:
    """The outcome of `step` was journaled: the call span that made it says so."""
    call = _CALL.get()
    if call is not None and call.run_id == run_id and call.step == step:
        call.span.set_attribute(OUTCOME, outcome)


def journal_fields() -> dict[str, str]:
    """The trace and span ids (hex, as W3C `traceparent` writes them) to journal: the current span's,
    else the remote caller's (`remote_parent`); {} without either."""
    api = _api()
    context = api.get_current_span().get_span_context() if api is not None else None
    if context is not None and context.is_valid:
        return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}
    return dict(_REMOTE.get() or {})


def traceparent_fields(traceparent: object) -> dict[str, str]:
    """The trace and parent span ids of a W3C `traceparent` value; {} when it is not a valid one."""
    found = _TRACEPARENT.fullmatch(traceparent.strip()) if isinstance(traceparent, str) else None
    if found is None or set(found[1]) == {"0"} or set(found[2]) == {"0"}:
        return {}
    return {"trace_id": found[1], "span_id": found[2]}


@contextmanager
def remote_parent(traceparent: object) -> Iterator[None]:
    """While the block runs, a call journaled with no span of this process current journals the trace
    of a remote caller's W3C `traceparent` (an HTTP header, an MCP request's `_meta.traceparent`).
    Needs no OpenTelemetry: the ids are read from the text."""
    token = _REMOTE.set(traceparent_fields(traceparent) or None)
    try:
        yield
    finally:
        _REMOTE.reset(token)


@contextmanager
def framework_trace(trace_id: object, span_id: object = None) -> Iterator[None]:
    """While the block runs, a call journaled with no OpenTelemetry span current journals a framework's
    own trace ids (the OpenAI Agents SDK's `trace_...` and `span_...`), kept as the framework writes
    them; ids of another shape are not journaled."""
    fields = {"trace_id": trace_id} if isinstance(trace_id, str) and _FRAMEWORK_ID.fullmatch(trace_id) else {}
    if fields and isinstance(span_id, str) and _FRAMEWORK_ID.fullmatch(span_id):
        fields["span_id"] = span_id
    token = _REMOTE.set(fields or _REMOTE.get())
    try:
        yield
    finally:
        _REMOTE.reset(token)


@contextmanager
def rollback_span(run_id: str) -> Iterator[Any]:
    """A span around one rollback; yields it (or None) for `rolled_back`."""
    api = _api()
    if api is None:
        yield None
        return
    with api.get_tracer("reversi").start_as_current_span("reversi.rollback", attributes={RUN_ID: run_id}) as span:
        yield span


def rolled_back(span: Any, complete: bool) -> None:
    """The rollback of `rollback_span` ended, its report complete or not."""
    if span is not None:
        span.set_attribute(OUTCOME, "complete" if complete else "incomplete")


@contextmanager
def compensation_span(run_id: str, step: int, tool: str, attempt: int) -> Iterator[Any]:
    """A span around one compensation attempt; yields it (or None) for `compensation_ended`."""
    api = _api()
    if api is None:
        yield None
        return
    attributes = {RUN_ID: run_id, STEP: step, TOOL: tool, "reversi.attempt": attempt}
    with api.get_tracer("reversi").start_as_current_span(f"reversi.compensate {tool}", attributes=attributes) as span:
        yield span


def compensation_ended(span: Any, error: str | None) -> None:
    """The attempt of `compensation_span` ended: undone, or failed with `error` (an error status)."""
    if span is None:
        return
    span.set_attribute(OUTCOME, "compensation_failed" if error is not None else "compensated")
    api = _api()
    if error is not None and api is not None:
        span.set_status(api.Status(api.StatusCode.ERROR, error))

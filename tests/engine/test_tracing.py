"""OpenTelemetry: recorded calls, refusals, rollbacks and compensation attempts are spans in the caller's
trace, and the trace id is journaled with the step, so an operator goes from a trace to the run and back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.otel_spans import EXPORTER, in_memory_spans

import reversi
from reversi.errors import Halted


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield in_memory_spans()
    EXPORTER.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def create_charge(amount: int, order_id: str) -> dict[str, Any]:
    with trace.get_tracer("stripe-client").start_as_current_span("POST /v1/charges"):
        return {"id": f"ch_{order_id}", "amount": amount}


def test_a_recorded_call_is_a_span_in_the_callers_trace_and_its_trace_id_is_journaled(
    ledger: reversi.Ledger, spans: InMemorySpanExporter
) -> None:
    run = ledger.start_run(actor="billing-agent")
    with trace.get_tracer("agent").start_as_current_span("agent turn") as turn:
        run.call("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, create_charge)
    [call] = named(spans, "reversi.call stripe.create_charge")
    [http] = named(spans, "POST /v1/charges")
    assert call.context is not None and call.context.trace_id == turn.get_span_context().trace_id
    assert parent_id(call) == turn.get_span_context().span_id and parent_id(http) == call.context.span_id
    assert dict(call.attributes or {}) == {"reversi.run_id": run.id, "reversi.step": 0,
                                           "reversi.tool": "stripe.create_charge", "reversi.outcome": "succeeded"}
    intended = next(e for e in run.events() if e.type == "intended")
    trace_id, span_id = hex_ids(call)
    assert (intended.data["trace_id"], intended.data["span_id"]) == (trace_id, span_id)


def test_a_refusal_is_a_span_that_says_refused(ledger: reversi.Ledger, spans: InMemorySpanExporter) -> None:
    ledger.add_halt("card processor incident", tool="stripe.*")
    run = ledger.start_run(actor="billing-agent")
    with pytest.raises(Halted):
        run.call("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, create_charge)
    [refused] = named(spans, "reversi.call stripe.create_charge")
    assert refused.attributes is not None and refused.attributes["reversi.outcome"] == "refused"
    assert refused.attributes["reversi.refusal"] == "halted" and "reversi.step" not in refused.attributes
    assert refused.status.status_code is StatusCode.ERROR and named(spans, "POST /v1/charges") == []


def test_an_async_call_is_traced_and_journaled_alike(ledger: reversi.Ledger, spans: InMemorySpanExporter) -> None:
    run = ledger.start_run(actor="billing-agent")

    async def agent() -> None:
        with trace.get_tracer("agent").start_as_current_span("agent turn"):
            await run.acall("stripe.create_charge", {"amount": 5, "order_id": "o-2"}, create_charge)

    asyncio.run(agent())
    [call] = named(spans, "reversi.call stripe.create_charge")
    [http] = named(spans, "POST /v1/charges")
    assert call.context is not None and parent_id(http) == call.context.span_id
    assert call.attributes is not None and call.attributes["reversi.outcome"] == "succeeded"
    intended = next(e for e in run.events() if e.type == "intended")
    assert intended.data["trace_id"] == hex_ids(call)[0]


def test_a_rollback_and_each_compensation_attempt_are_spans(
    ledger: reversi.Ledger, spans: InMemorySpanExporter
) -> None:
    run = ledger.start_run(actor="billing-agent")
    run.call("stripe.create_charge", {"amount": 700, "order_id": "o-1"}, create_charge)
    attempts: list[int] = []

    def refund(call: dict[str, Any]) -> dict[str, Any]:
        attempts.append(call["attempt"])
        if call["attempt"] == 1:
            raise ConnectionError("stripe unreachable")
        return {"refund": "re_1"}

    with trace.get_tracer("operator").start_as_current_span("undo OPS-12") as undo:
        report = run.rollback(compensate=refund, retry=reversi.Retry(attempts=2, base_ms=1))
    assert report.complete and attempts == [1, 2]
    [rollback] = named(spans, "reversi.rollback")
    first, second = sorted(named(spans, "reversi.compensate stripe.refund"),
                           key=lambda s: str((s.attributes or {})["reversi.attempt"]))
    assert rollback.context is not None and parent_id(rollback) == undo.get_span_context().span_id
    assert dict(rollback.attributes or {}) == {"reversi.run_id": run.id, "reversi.outcome": "complete"}
    assert parent_id(first) == parent_id(second) == rollback.context.span_id
    assert dict(first.attributes or {}) == {"reversi.run_id": run.id, "reversi.step": 0,
                                            "reversi.tool": "stripe.refund", "reversi.attempt": 1,
                                            "reversi.outcome": "compensation_failed"}
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes is not None and second.attributes["reversi.outcome"] == "compensated"
    compensating = [e for e in run.events() if e.type == "compensating"]
    assert [e.data["span_id"] for e in compensating] == [hex_ids(first)[1], hex_ids(second)[1]]


def test_without_a_current_span_nothing_is_journaled_of_traces(ledger: reversi.Ledger) -> None:
    run = ledger.start_run(actor="billing-agent")
    run.begin("stripe.create_charge", {"amount": 1, "order_id": "o-3"}).succeeded({"id": "ch_o-3"})
    intended = next(e for e in run.events() if e.type == "intended")
    assert "trace_id" not in intended.data

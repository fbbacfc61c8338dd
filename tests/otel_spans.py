"""OpenTelemetry's in-memory exporter behind the global tracer provider, which is set once a process.

A tracer provider cannot be unset, and with one in place the `mcp` SDK's client injects its own
`traceparent` into every request's `_meta`: tests that compare what reached an upstream would then
see it. So the provider's tracers record only while a test asked for spans (`in_memory_spans()`),
and are no-op tracers again once that test ends (`stop_recording()`, from the suite's conftest).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()
_recording = [False]


class _WhileRecording(trace.Tracer):
    """A tracer of the provider's while a test records spans, a no-op one otherwise."""

    def __init__(self, real: trace.Tracer) -> None:
        self._real, self._idle = real, trace.NoOpTracer()

    def _now(self) -> trace.Tracer:
        return self._real if _recording[0] else self._idle

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._now().start_span(*args, **kwargs)

    def start_as_current_span(  # type: ignore[override]  # the same arguments, passed on as they came
        self, *args: Any, **kwargs: Any
    ) -> AbstractContextManager[trace.Span]:
        return self._now().start_as_current_span(*args, **kwargs)


class _SwitchedProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _WhileRecording(super().get_tracer(*args, **kwargs))


def in_memory_spans() -> InMemorySpanExporter:
    """The exporter every span finished from now until the test ends goes to, emptied."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = _SwitchedProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    _recording[0] = True
    return EXPORTER


def stop_recording() -> None:
    _recording[0] = False

"""Prometheus metrics: calls recorded, refusals by reason, rollbacks by outcome, request latencies, what
retention pruned and holds back, and the undo windows of standing steps that close soon."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reversi.core.times import parse_time
from reversi.core.windows import Closing

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """One registry per app, so several servers in one process (tests) keep their counts apart."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "reversi_calls_recorded", "Calls journaled as intended over HTTP.", registry=self.registry
        )
        self.refusals = Counter(
            "reversi_refusals", "Calls refused before they ran, by reason code.", ["reason"], registry=self.registry
        )
        self.rollbacks = Counter(
            "reversi_rollbacks", "Rollback jobs finished, by outcome (complete, incomplete, error).", ["outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "reversi_http_request_duration_seconds", "Time to answer a request, by route and status.",
            ["method", "route", "status"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.retention_pruned = Counter(
            "reversi_retention_pruned_runs", "Runs deleted by this server's retention passes.", registry=self.registry,
        )
        self.retention_held = Gauge(
            "reversi_retention_held_runs",
            "Runs opened before the retention window that its last pass kept (something in them is still open).",
            registry=self.registry,
        )
        self.window_soonest = Gauge(
            "reversi_undo_window_soonest_seconds",
            "Seconds until the soonest undo window of a standing step closes (-1: none has one).",
            registry=self.registry,
        )
        self.windows_closing = Gauge(
            "reversi_undo_windows_closing_24h", "Standing steps whose undo window closes within 24 hours.",
            registry=self.registry,
        )
        self._series: dict[tuple[str, str, str], Any] = {}  # labels() looks its child up each time; this once
        self._windows_at: float | None = None

    def windows(self, read: Callable[[], list[Closing]], now: datetime, every_s: float = 60.0) -> None:
        """Set the window gauges from `read()` (the standing steps' windows, soonest first), at most once
        every `every_s` seconds: each read plans every run with a standing step."""
        if self._windows_at is not None and time.monotonic() - self._windows_at < every_s:
            return
        self._windows_at = time.monotonic()
        found = read()
        left = [(parse_time(c.closes) - now).total_seconds() for c in found]
        self.window_soonest.set(min(left) if left else -1)
        self.windows_closing.set(sum(1 for s in left if s <= 86_400))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request's latency under its method, route template and status."""
        labels = (method, route, str(status))
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = self.latency.labels(*labels)
        series.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class Timing:
    """ASGI middleware observing each request's latency under its route's template (not its path)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope["method"], template, status[0], time.perf_counter() - start)

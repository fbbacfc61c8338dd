"""Prometheus metrics: calls recorded, refusals by reason, rollbacks by outcome, request latencies, and
what retention pruned and holds back."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
        self._series: dict[tuple[str, str, str], Any] = {}  # labels() looks its child up each time; this once

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

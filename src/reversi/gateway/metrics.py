"""Prometheus metrics of the gateway: tool calls by outcome, refusals by reason, call latency, upstreams.

Served at `/metrics` when the gateway runs over HTTP; counted on stdio too (nobody reads them there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reversi.gateway.upstream import UpstreamPool

_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class GatewayMetrics:
    """One registry per gateway, so several in one process (tests) keep their counts apart."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, pool: UpstreamPool) -> None:
        self.registry = CollectorRegistry()
        self._calls = Counter(
            "reversi_gateway_calls",
            "Tool calls journaled, by outcome (succeeded, failed, uncertain).",
            ["outcome"],
            registry=self.registry,
        )
        self._refusals = Counter(
            "reversi_refusals", "Calls refused before they ran, by reason code.", ["reason"], registry=self.registry
        )
        self._latency = Histogram(
            "reversi_gateway_tool_call_duration_seconds",
            "Time to answer a tools/call, journal writes included, by upstream.",
            ["upstream"],
            buckets=_CALL_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Upstreams(pool))

    def outcome(self, status: str) -> None:
        self._calls.labels(status).inc()

    def refusal(self, reason: str) -> None:
        self._refusals.labels(reason).inc()

    def answered(self, upstream: str, seconds: float) -> None:
        self._latency.labels(upstream).observe(seconds)

    def count_sessions(self, counts: Mapping[str, Callable[[], int]]) -> None:
        """Serve `reversi_gateway_sessions{endpoint}`: each endpoint's count, read when scraped."""
        self.registry.register(_Sessions(counts))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _Upstreams(Collector):
    """Each upstream's state, read when scraped."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("reversi_gateway_upstream_up", "1 while the upstream is connected.", labels=["upstream"])
        tools = GaugeMetricFamily("reversi_gateway_upstream_tools", "Tools the upstream offers.", labels=["upstream"])
        restarts = CounterMetricFamily(
            "reversi_gateway_upstream_restarts", "Times the upstream was started again.", labels=["upstream"]
        )
        for upstream in self._pool.upstreams:
            up.add_metric([upstream.name], 1.0 if upstream.connected else 0.0)
            tools.add_metric([upstream.name], float(len(upstream.tools)))
            restarts.add_metric([upstream.name], float(upstream.restarts))
        yield from (up, tools, restarts)


class _Sessions(Collector):
    """The MCP sessions the gateway holds anything for, by endpoint."""

    def __init__(self, counts: Mapping[str, Callable[[], int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        sessions = GaugeMetricFamily(
            "reversi_gateway_sessions", "Open MCP sessions (handshake clients), by endpoint.", labels=["endpoint"]
        )
        for endpoint, count in self._counts.items():
            sessions.add_metric([endpoint], float(count()))
        yield sessions

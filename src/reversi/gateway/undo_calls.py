"""The upstream calls a rollback makes: each compensation with its idempotency key in the call's
`_meta` (`reversi/idempotency_key`), each declared read-back as it is. The operator's rollbacks and
`reversi manifest drill` both make them through here."""

from __future__ import annotations

from typing import cast

from mcp import types

from reversi.core.backoff import Retry
from reversi.core.calls import CALL_META_KEY, IDEMPOTENCY_META_KEY, CallId
from reversi.core.json_values import LooseJSON, LooseJSONObject
from reversi.core.surfaces import Surface
from reversi.gateway.upstream import UpstreamPool
from reversi.gateway.upstream_calls import call_upstream

ROLLBACK_RETRY = Retry(attempts=Surface.GATEWAY.attempts, base_ms=250)


class UndoCalls:
    """`compensate` and `read_back` for `Run.arollback`, on the pool's upstreams (each raises
    `ToolAnsweredError` for a tool's error answer, as `call_upstream` does)."""

    def __init__(self, pool: UpstreamPool, call_timeout: float) -> None:
        self.pool = pool
        self.call_timeout = call_timeout

    async def compensate(self, call: LooseJSONObject) -> LooseJSON:
        meta = cast(types.RequestParamsMeta, {IDEMPOTENCY_META_KEY: call["idempotency_key"]})
        return await call_upstream(self.pool, call["tool"], call["args"], self.call_timeout, meta)

    async def read_back(self, tool: str, arguments: LooseJSON, made_for: CallId | None = None) -> LooseJSON:
        """A read; `made_for`: the step it is made for (a probe's), told to the connectors' server."""
        meta = cast(types.RequestParamsMeta, {CALL_META_KEY: made_for.to_dict()}) if made_for else None
        return await call_upstream(self.pool, tool, arguments, self.call_timeout, meta)

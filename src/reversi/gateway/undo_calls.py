"""The upstream calls a rollback makes: each compensation with its idempotency key in the call's
`_meta` (`reversi/idempotency_key`), each declared read-back as it is. The operator's rollbacks and
`reversi manifest drill` both make them through here."""

from __future__ import annotations

from typing import Any, cast

from mcp import types

from reversi.core.backoff import Retry
from reversi.gateway.results import error_text, is_error, result_value
from reversi.gateway.upstream import UpstreamPool

IDEMPOTENCY_META_KEY = "reversi/idempotency_key"
ROLLBACK_RETRY = Retry(attempts=3, base_ms=250)


class CompensationFailed(Exception):
    """The upstream answered a compensation or read-back with an error."""


class UndoCalls:
    """`compensate` and `read_back` for `Run.arollback`, on the pool's upstreams."""

    def __init__(self, pool: UpstreamPool, call_timeout: float) -> None:
        self.pool = pool
        self.call_timeout = call_timeout

    async def call(self, tool: str, arguments: Any, meta: types.RequestParamsMeta | None = None) -> Any:
        """Call `tool` (a public name) and return its `$result`.

        Raises:
            CompensationFailed: no upstream serves it, or it answered with a tool error.
        """
        route = self.pool.route(tool)
        if route is None:
            raise CompensationFailed(f"no upstream serves {tool}")
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=route.tool, arguments=arguments, _meta=meta)
        )
        raw = await route.upstream.request(request, self.call_timeout)
        if is_error(raw):
            raise CompensationFailed(error_text(raw))
        return result_value(raw)

    async def compensate(self, call: dict[str, Any]) -> Any:
        meta = cast(types.RequestParamsMeta, {IDEMPOTENCY_META_KEY: call["idempotency_key"]})
        return await self.call(call["tool"], call["args"], meta)

    async def read_back(self, tool: str, arguments: Any) -> Any:
        return await self.call(tool, arguments)

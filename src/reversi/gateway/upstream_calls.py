"""The tool calls the gateway makes of its own on the upstreams: captures before a call, compensations
and read-backs during a rollback. None of them is journaled as a step."""

from __future__ import annotations

from typing import cast

from mcp import types

from reversi.core.answers import TextAnswer
from reversi.core.calls import CALL_META_KEY, COMPENSATION_META_KEY, IDEMPOTENCY_META_KEY
from reversi.core.json_values import LooseJSON
from reversi.errors import ToolAnsweredError
from reversi.gateway.results import error_text, is_error, journaled_answer, result_value
from reversi.gateway.upstream import UpstreamPool


async def call_upstream(
    pool: UpstreamPool, tool: str, arguments: LooseJSON, timeout: float, meta: types.RequestParamsMeta | None = None,
    *, keep_text: bool = False,
) -> TextAnswer | LooseJSON:
    """Call `tool` (by its public name) on the upstream that serves it; returns `$result` of its answer
    (with `keep_text`, as the journal keeps it: `journaled_answer`).

    Raises:
        ToolAnsweredError: the tool answered with an error (`isError`), whose text it carries.
        LookupError: no upstream serves `tool`.
        TimeoutError, UpstreamUnavailable, UpstreamLost, MCPError: the call got no answer.
    """
    route = pool.route(tool)
    if route is None:
        raise LookupError(f"no upstream serves {tool}")
    if meta is not None and CALL_META_KEY in meta and not route.upstream.wants_steps:
        meta = cast(types.RequestParamsMeta, {k: v for k, v in meta.items() if k != CALL_META_KEY}) or None
    if meta is not None and IDEMPOTENCY_META_KEY in meta and route.upstream.wants_steps:
        # a connector checks the key against the compensation's name as the run journaled it
        meta = cast(types.RequestParamsMeta, {**meta, COMPENSATION_META_KEY: tool})
    params = types.CallToolRequestParams(name=route.tool, arguments=arguments, _meta=meta)
    raw = await route.upstream.request(types.CallToolRequest(params=params), timeout)
    if is_error(raw):
        raise ToolAnsweredError(error_text(raw))
    return journaled_answer(raw) if keep_text else result_value(raw)

"""Answering through the MCP SDK's server with a result exactly as it is, in the agent's revision.

The SDK validates a handler's result against the revision the agent negotiated and drops every field
that revision does not name: a server's own annotations (`recovery`), an upstream's `vendorField`.
A handler that must answer with JSON as it is passes it to `passed_through`, under the `exact_results`
middleware, which answers with it translated only where revisions differ: the 2026-07-28 revision adds
`resultType` to every result, `ttlMs` and `cacheScope` to listings and reads, and the server's stamp in
`_meta`; the handshake revisions (2024-11-05 … 2025-11-25) have none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import CACHEABLE_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from reversi.core.json_values import JSONObjectView, LooseJSON, LooseJSONObject

__all__ = ["ENVELOPE", "exact_results", "for_agent", "is_modern", "passed_through", "without_envelope"]

ENVELOPE = "io.modelcontextprotocol/"
_MODERN_ONLY = ("resultType", "ttlMs", "cacheScope")
# The SDK's own defaults for a result that says nothing of caching: immediately stale, never shared.
_NO_CACHE = {"ttlMs": 0, "cacheScope": "private"}


def is_modern(version: str | None) -> bool:
    """Whether `version` is a stateless (2026-07-28 or later) revision."""
    return version in MODERN_PROTOCOL_VERSIONS


def without_envelope(result: Mapping[str, LooseJSON]) -> LooseJSONObject:
    """An upstream's result without its own protocol envelope in `_meta` (it names the upstream, not
    the gateway the agent talks to)."""
    meta = result.get("_meta")
    if not isinstance(meta, Mapping) or not any(k.startswith(ENVELOPE) for k in meta):
        return dict(result)
    kept = {k: v for k, v in meta.items() if not k.startswith(ENVELOPE)}
    return {k: v for k, v in result.items() if k != "_meta"} | ({"_meta": kept} if kept else {})


def for_agent(method: str, raw: Mapping[str, LooseJSON], version: str, server_info: JSONObjectView) -> LooseJSONObject:
    """`raw`, an upstream's result to `method`, as the agent's revision `version` spells it.

    To a 2026 agent: `resultType` (`complete`) and, on listings and reads, the SDK's no-caching
    hints where the upstream gave none, and the gateway's `serverInfo` in `_meta`. To a handshake
    agent: without those. Everything else is left as it came.
    """
    result = without_envelope(raw)
    if not is_modern(version):
        return {k: v for k, v in result.items() if k not in _MODERN_ONLY}
    added = {"resultType": "complete", **(_NO_CACHE if method in CACHEABLE_METHODS else {})}
    result |= {k: v for k, v in added.items() if k not in result}
    meta = result.get("_meta")
    if meta is None or isinstance(meta, Mapping):
        result["_meta"] = {**(meta or {}), SERVER_INFO_META_KEY: server_info}
    return result


_PASSED: ContextVar[list[LooseJSONObject] | None] = ContextVar("reversi_passed_result", default=None)

# What a handler returns to the SDK in place of an upstream's result: valid in every revision, so
# that the SDK's own checks (the method exists, the params are valid, the session is initialized)
# run as for any server, and then replaced by `exact_results` with the result as it came.
_STAND_INS: dict[str, Callable[[], types.Result]] = {
    "tools/call": lambda: types.CallToolResult(content=[]),
    "tools/list": lambda: types.ListToolsResult(tools=[]),
    "resources/list": lambda: types.ListResourcesResult(resources=[]),
    "resources/templates/list": lambda: types.ListResourceTemplatesResult(resource_templates=[]),
    "resources/read": lambda: types.ReadResourceResult(contents=[]),
    "prompts/list": lambda: types.ListPromptsResult(prompts=[]),
    "prompts/get": lambda: types.GetPromptResult(messages=[]),
    "completion/complete": lambda: types.CompleteResult(completion=types.Completion(values=[])),
}


def passed_through(method: str, raw: LooseJSONObject) -> Any:
    """What a handler returns to answer `method` with `raw` exactly (see `exact_results`); typed Any, as it
    stands for the SDK's result model of whichever `method` the handler answers."""
    holder = _PASSED.get()
    if holder is None:  # not under `exact_results`: the SDK shapes it
        return raw
    holder.append(raw)
    return _STAND_INS[method]()


def exact_results(server_info: Callable[[], JSONObjectView]) -> ServerMiddleware[Any]:
    """A server middleware answering with the result a handler passed to `passed_through`, translated
    for the agent's revision; `server_info()` is the gateway's `serverInfo` stamp."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        holder: list[LooseJSONObject] = []
        token = _PASSED.set(holder)
        try:
            result = await call_next(ctx)
        finally:
            _PASSED.reset(token)
        if not holder:
            return result
        return for_agent(ctx.method, holder[0], ctx.protocol_version, server_info())

    return middleware

"""Between the MCP revision the agent negotiated and the one each upstream speaks.

The 2026-07-28 revision adds fields to results (`resultType` on every one, `ttlMs` and
`cacheScope` on listings and reads) and an envelope in `_meta`; the handshake revisions
(2024-11-05 … 2025-11-25) have none of them, and `task` where 2026 has `inputResponses` and
`requestState` in requests. The gateway forwards each upstream's JSON as it came and changes only
these, both ways. What the SDK would otherwise do to a handler's result (validate it against the
agent's revision and drop every field that revision does not name) is bypassed by `exact_results`,
so a `vendorField` reaches the agent, and a result that a 2025 server sends to a 2026 agent is not
turned into `-32603` after it was journaled `succeeded`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import CACHEABLE_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

ENVELOPE = "io.modelcontextprotocol/"
_MODERN_ONLY = ("resultType", "ttlMs", "cacheScope")
# The SDK's own defaults for a result that says nothing of caching: immediately stale, never shared.
_NO_CACHE = {"ttlMs": 0, "cacheScope": "private"}
# Request fields one era has and the other does not (a 2025 upstream has no multi-round-trip input, a
# 2026 one no tasks), as the wire names them.
_MODERN_REQUEST_FIELDS = ("inputResponses", "requestState")
_HANDSHAKE_REQUEST_FIELDS = ("task",)


def is_modern(version: str | None) -> bool:
    """Whether `version` is a stateless (2026-07-28 or later) revision."""
    return version in MODERN_PROTOCOL_VERSIONS


def without_envelope(result: Mapping[str, Any]) -> dict[str, Any]:
    """An upstream's result without its own protocol envelope in `_meta` (it names the upstream, not
    the gateway the agent talks to)."""
    meta = result.get("_meta")
    if not isinstance(meta, Mapping) or not any(k.startswith(ENVELOPE) for k in meta):
        return dict(result)
    kept = {k: v for k, v in meta.items() if not k.startswith(ENVELOPE)}
    return {k: v for k, v in result.items() if k != "_meta"} | ({"_meta": kept} if kept else {})


def for_agent(method: str, raw: Mapping[str, Any], version: str, server_info: dict[str, Any]) -> dict[str, Any]:
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


def asks_for_input(raw: Mapping[str, Any]) -> bool:
    """Whether a 2026 upstream answered with an interim `input_required` result (it wants the client
    to answer questions and send the request again), which is no outcome."""
    return raw.get("resultType") == "input_required"


class AsSent(types.Request[dict[str, Any] | None, str]):
    """A request whose params go upstream as the agent sent them (what `for_upstream` leaves): the
    SDK's own request models would drop every field they do not name."""


def for_upstream(
    params: Mapping[str, Any] | None, upstream_version: str | None, meta: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The agent's request params, as it sent them, for an upstream speaking `upstream_version`, with
    `meta` as their `_meta`: without the fields the upstream's era does not have."""
    gone = _HANDSHAKE_REQUEST_FIELDS if is_modern(upstream_version) else _MODERN_REQUEST_FIELDS
    kept = {k: v for k, v in (params or {}).items() if k not in gone and k != "_meta"}
    return kept | ({"_meta": dict(meta)} if meta else {})


# -- passing a handler's result through the SDK's server unchanged ---------------------------------

_PASSED: ContextVar[list[dict[str, Any]] | None] = ContextVar("reversi_passed_result", default=None)

# What a handler returns to the SDK in place of an upstream's result: valid in every revision, so
# that the SDK's own checks (the method exists, the params are valid, the session is initialized)
# run as for any server, and then replaced by `exact_results` with the result as it came.
_STAND_INS: dict[str, Any] = {
    "tools/call": lambda: types.CallToolResult(content=[]),
    "tools/list": lambda: types.ListToolsResult(tools=[]),
    "resources/list": lambda: types.ListResourcesResult(resources=[]),
    "resources/templates/list": lambda: types.ListResourceTemplatesResult(resource_templates=[]),
    "resources/read": lambda: types.ReadResourceResult(contents=[]),
    "prompts/list": lambda: types.ListPromptsResult(prompts=[]),
    "prompts/get": lambda: types.GetPromptResult(messages=[]),
    "completion/complete": lambda: types.CompleteResult(completion=types.Completion(values=[])),
}


def passed_through(method: str, raw: dict[str, Any]) -> Any:
    """What a handler returns to answer `method` with `raw` exactly (see `exact_results`)."""
    holder = _PASSED.get()
    if holder is None:  # not under `exact_results`: the SDK shapes it
        return raw
    holder.append(raw)
    return _STAND_INS[method]()


def exact_results(server_info: Any) -> Any:
    """A server middleware answering with the result a handler passed to `passed_through`, translated
    for the agent's revision; `server_info()` is the gateway's `serverInfo` stamp."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        holder: list[dict[str, Any]] = []
        token = _PASSED.set(holder)
        try:
            result = await call_next(ctx)
        finally:
            _PASSED.reset(token)
        if not holder:
            return result
        return for_agent(ctx.method, holder[0], ctx.protocol_version, server_info())

    return middleware

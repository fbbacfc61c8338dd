"""Between the MCP revision the agent negotiated and the one each upstream speaks: requests.

The handshake revisions (2024-11-05 … 2025-11-25) have `task` where 2026 has `inputResponses` and
`requestState` in requests. The gateway forwards each agent's request as it came, less what the
upstream's era does not have; results go back through `reversi.mcp_results` (`exact_results`), so a
`vendorField` reaches the agent, and a result that a 2025 server sends to a 2026 agent is not turned
into `-32603` after it was journaled `succeeded`.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp import types

from reversi.core.json_values import JSONObjectView, LooseJSON, LooseJSONObject
from reversi.mcp_results import is_modern

# Request fields one era has and the other does not (a 2025 upstream has no multi-round-trip input, a
# 2026 one no tasks), as the wire names them.
_MODERN_REQUEST_FIELDS = ("inputResponses", "requestState")
_HANDSHAKE_REQUEST_FIELDS = ("task",)


def asks_for_input(raw: JSONObjectView) -> bool:
    """Whether a 2026 upstream answered with an interim `input_required` result (it wants the client
    to answer questions and send the request again), which is no outcome."""
    return raw.get("resultType") == "input_required"


class AsSent(types.Request[LooseJSONObject | None, str]):
    """A request whose params go upstream as the agent sent them (what `for_upstream` leaves): the
    SDK's own request models would drop every field they do not name."""


def for_upstream(
    params: Mapping[str, LooseJSON] | None, upstream_version: str | None, meta: Mapping[str, LooseJSON] | None
) -> LooseJSONObject:
    """The agent's request params, as it sent them, for an upstream speaking `upstream_version`, with
    `meta` as their `_meta`: without the fields the upstream's era does not have."""
    gone = _HANDSHAKE_REQUEST_FIELDS if is_modern(upstream_version) else _MODERN_REQUEST_FIELDS
    kept = {k: v for k, v in (params or {}).items() if k not in gone and k != "_meta"}
    return kept | ({"_meta": dict(meta)} if meta else {})



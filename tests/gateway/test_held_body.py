"""The gateway over HTTP: a call whose key is revoked while its body is on its way is never forwarded;
its journal write reads the key again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.gateway.conftest import Shop
from tests.server.test_held_bodies import finish, held_request

import reversi
from reversi.engine.keys import create_key, list_keys, revoke_key

REVISION = "2026-07-28"  # a stateless MCP request: one POST, no session


def test_a_gateway_call_whose_key_is_revoked_while_its_body_is_held_never_reaches_the_upstream(
    tmp_path: Path, http_shop: tuple[Shop, str], serve: Callable[..., str]
) -> None:
    shop, upstream_url = http_shop
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        stolen = create_key(ledger.store, "mallory", "agent")[1]
    base = serve("--upstream", f"web={upstream_url}", "--db", db)
    params = {"name": "create_order", "arguments": {"order_id": "late"},
              "_meta": {"io.modelcontextprotocol/protocolVersion": REVISION,
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": REVISION,
               "Mcp-Method": "tools/call", "Mcp-Name": "create_order", "Reversi-Run-Id": "run_held"}
    sock, last = held_request(base, "/mcp", stolen, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                     "params": params}, headers)
    with reversi.open(db) as ledger:
        mallory = next(row for row in list_keys(ledger.store) if row.name == "mallory")
        revoke_key(ledger.store, mallory.key_id, by="admin")

    status = finish(sock, last)  # 401 before the call, or the tool call's own error answer

    assert status in (200, 401)
    assert shop.calls() == []
    with reversi.open(db) as ledger:
        assert all(not s.steps for s in ledger.list_runs())

"""What the gateway passes on to an upstream is the call, and only the call: never the agent's
`Authorization` (its Reversi key) or any other header of the agent's, never `_meta` of Reversi's own
(`reversi/...`, which a compensation's idempotency key travels in) or of the agent's connection. The
upstream is the tests' own, over HTTP, and writes down every header and `_meta` it gets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import types
from tests.gateway.conftest import SHOP_MANIFEST, Shop
from tests.gateway.test_http import _bearer, connect

import reversi
from reversi.core.calls import IDEMPOTENCY_META_KEY
from reversi.engine.keys import create_key

pytestmark = pytest.mark.anyio

AGENT_META = {"reversi/idempotency_key": "forged-key", "reversi/run_id": "run_other", "vendor/trace": "kept",
              "io.modelcontextprotocol/related-task": "x", "progressToken": "p-1"}
AGENT_HEADERS = {"X-Agent-Secret": "agent-secret-3f9a", "Cookie": "session=agent-cookie-77b2",
                 "Reversi-Actor": "billing-bot"}


async def test_the_upstream_never_gets_the_agents_key_headers_or_reversis_own_meta(
    tmp_path: Path, http_shop: tuple[Shop, str], serve: Callable[..., str]
) -> None:
    shop, upstream_url = http_shop
    db = f"sqlite:///{tmp_path}/r.db"
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(SHOP_MANIFEST)
    with reversi.open(db) as ledger:
        agent_key = create_key(ledger.store, "bot", "agent")[1]
        admin_key = create_key(ledger.store, "ops", "admin")[1]
    base = serve("--upstream", f"web={upstream_url}", "--db", db, "-m", str(manifest))
    async with connect(f"{base}/mcp", _bearer(agent_key, **AGENT_HEADERS, **{"Reversi-Run-Id": "run_fwd"})) as agent:
        meta = cast(types.RequestParamsMeta, AGENT_META)
        assert not (await agent.call_tool("create_order", {"order_id": "f1"}, meta=meta)).is_error
        assert not (await agent.call_tool("echo", {"text": "hi"}, meta=meta)).is_error
    async with connect(f"{base}/operator/mcp", _bearer(admin_key, **AGENT_HEADERS)) as operator:
        undone = await operator.call_tool("reversi.execute_rollback", {"run_id": "run_fwd", "confirm": True})
        assert not undone.is_error, undone

    # The agent asked for progress: the gateway asks the upstream for it under a token of its own connection.
    calls = {c["tool"]: {k: v for k, v in c["meta"].items() if k not in ("progress_token", "progressToken")}
             for c in shop.calls()}
    assert calls["create_order"] == calls["echo"] == {"vendor/trace": "kept"}  # the agent's own, less Reversi's
    assert "p-1" not in json.dumps(shop.calls())
    with reversi.open(db) as ledger:
        key = next(e.data["idempotency_key"] for e in ledger.get_run("run_fwd").events() if e.type == "compensating")
    assert calls["cancel_order"] == {IDEMPOTENCY_META_KEY: key} and key != AGENT_META["reversi/idempotency_key"]

    sent = [dict(cast(list[tuple[str, str]], request)) for request in _headers(shop.state)]
    assert len(sent) >= 3
    for headers in sent:
        assert "authorization" not in headers and "cookie" not in headers, headers
        assert not {name for name in headers if name.startswith(("x-agent", "reversi-"))}, headers
        text = json.dumps(headers)
        assert agent_key not in text and admin_key not in text and "agent-secret" not in text, headers


def _headers(state: Path) -> list[Any]:
    return [json.loads(line) for line in (state / "headers.jsonl").read_text().splitlines()]

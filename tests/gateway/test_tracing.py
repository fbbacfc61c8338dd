"""An agent's W3C trace context in `_meta.traceparent` is journaled with the step the gateway records."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from mcp import types
from tests.gateway.conftest import Shop, gateway

import reversi

pytestmark = pytest.mark.anyio
TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


async def test_the_agents_traceparent_is_journaled_and_passed_on(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    meta = {"traceparent": f"00-{TRACE_ID}-{SPAN_ID}-01"}
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_traced") as agent:
        await agent.call_tool("echo", {"text": "hi"}, meta=cast(types.RequestParamsMeta, meta))
        await agent.call_tool("echo", {"text": "no trace"})
    with reversi.open(db) as ledger:
        intended = [e.data for e in ledger.get_run("run_traced").events() if e.type == "intended"]
    assert intended[0]["trace_id"] == TRACE_ID and "trace_id" not in intended[1]
    assert shop.calls()[0]["meta"] == meta  # the upstream continues the same trace

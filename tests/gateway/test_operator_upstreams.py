"""The journal keeps which upstream each call of the gateway went to, and the operator warns when
the upstreams it started are not those (issue 13, item 4): its compensations would act on other data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types
from tests.gateway.conftest import Shop, gateway

import reversi

pytestmark = pytest.mark.anyio


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_each_call_journals_its_upstream_and_an_operator_started_otherwise_is_warned(
    tmp_path: Path, shop: Shop, shops: Any, shop_manifest: str
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "-m", shop_manifest, "--run-id", "run_via") as agent:
        await agent.call_tool("create_order", {"order_id": "v1", "amount": 3})
    with reversi.open(db) as ledger:
        intended = [e for e in ledger.get_run("run_via").events() if e.type == "intended"]
    command = shop.flag().partition("=")[2]
    assert intended[0].data["upstream"] == {"name": "shop", "command": command, "cwd": str(Path.cwd())}

    same = ["operator", "--upstream", shop.flag(), "--db", db, "-m", shop_manifest]
    async with gateway(*same) as operator:
        plan = await operator.call_tool("reversi.plan_rollback", {"run_id": "run_via"})
    assert "warning" not in _text(plan) and "reversi/warnings" not in (plan.meta or {})

    other = shops("other")  # the same server with another state directory: other data
    changed = ["operator", "--upstream", f"shop={other.flag().partition('=')[2]}", "--db", db, "-m", shop_manifest]
    errlog = tmp_path / "operator.err"
    with errlog.open("w") as err:
        async with gateway(*changed, errlog=err) as operator:
            plan = await operator.call_tool("reversi.plan_rollback", {"run_id": "run_via"})
            dry = await operator.call_tool("reversi.execute_rollback", {"run_id": "run_via"})
    first = _text(plan).splitlines()[0]
    assert first.startswith("warning: step 0 and later calls went through upstream shop (")
    assert "this operator's shop is" in first and str(other.state) in first
    assert plan.structured_content is not None and plan.structured_content["actions"][0]["kind"] == "compensate"
    assert plan.meta is not None and len(plan.meta["reversi/warnings"]) == 1
    assert _text(dry).startswith("warning: step 0")
    assert "run_via: step 0 and later calls went through upstream shop" in errlog.read_text()

    async with gateway("operator", "--upstream", f"store={command}", "--db", db, "-m", shop_manifest) as operator:
        plan = await operator.call_tool("reversi.plan_rollback", {"run_id": "run_via"})
    assert "this operator has no upstream shop" in _text(plan)

"""The operator endpoint on stdio: plan, dry run, rollback through the upstream (retries with one
idempotency key in `_meta`, declared read-backs), resolve, list runs, halt and resume."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from tests.gateway.conftest import Shop, gateway

pytestmark = pytest.mark.anyio


def _key(run_id: str, step: int, tool: str) -> str:
    return hashlib.sha256(f"{run_id}:{step}:{tool}".encode()).hexdigest()


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result
    return result.structured_content


async def test_an_operator_plans_rolls_back_resolves_and_halts(tmp_path: Path, shop: Shop, shop_manifest: str) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    common = ["--upstream", shop.flag(), "--db", db, "-m", shop_manifest]
    async with gateway(*common, "--run-id", "run_ops", "--call-timeout", "0.5") as agent:
        await agent.call_tool("create_order", {"order_id": "a1", "amount": 3})
        await agent.call_tool("create_order", {"order_id": "a2", "amount": 4})
        await agent.call_tool("echo", {"text": "reading"})
        assert (await agent.call_tool("wait", {"key": "never"})).is_error  # step 3: uncertain
        (shop.state / "fail-cancel").write_text("1")

        async with gateway("operator", *common) as operator:
            names = [t.name for t in (await operator.list_tools()).tools]
            assert names == [
                "reversi.plan_rollback",
                "reversi.execute_rollback",
                "reversi.plan_scope",
                "reversi.rollback_scope",
                "reversi.resolve_step",
                "reversi.reconcile",
                "reversi.follow_ups",
                "reversi.close_follow_up",
                "reversi.list_runs",
                "reversi.halt",
                "reversi.resume",
            ]
            plan = _ok(await operator.call_tool("reversi.plan_rollback", {"run_id": "run_ops"}))
            assert [(a["step"], a["kind"]) for a in plan["actions"]] == [
                (3, "unresolved"),
                (2, "skip"),
                (1, "compensate"),
                (0, "compensate"),
            ]
            assert plan["fully_reversible"] is False
            dry = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_ops"}))
            assert dry == plan and shop.calls("cancel_order") == []

            resolved = _ok(
                await operator.call_tool(
                    "reversi.resolve_step",
                    {"run_id": "run_ops", "step": 3, "status": "failed", "note": "the shop never saw it"},
                )
            )
            assert resolved["status"] == "failed"

            report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_ops", "confirm": True}))
            assert report["compensated"] == [1, 0] and report["complete"] is True and report["failed"] == []

            runs = _ok(await operator.call_tool("reversi.list_runs", {}))["runs"]
            assert [(r["run_id"], r["steps"], r["unresolved"]) for r in runs] == [("run_ops", 4, 0)]

            missing = await operator.call_tool("reversi.plan_rollback", {"run_id": "run_nope"})
            assert missing.is_error and missing.content[0].text == "no run run_nope"  # type: ignore[union-attr]
            misspelt = await operator.call_tool("reversi.execute_rollback", {"run_id": "run_ops", "confrim": True})
            assert misspelt.is_error and misspelt.content[0].text == (  # type: ignore[union-attr]
                "reversi.execute_rollback has no argument 'confrim' (its arguments: after_step, approve_compensations, "
                "concurrency, confirm, run_id, to)")

            halt = _ok(await operator.call_tool("reversi.halt", {"reason": "incident 7"}))
            assert halt["halt_id"].startswith("halt_")
            refused = await agent.call_tool("echo", {"text": "x"})
            assert refused.is_error and refused.content[0].text == (  # type: ignore[union-attr]
                f"kill switch: incident 7 (halt {halt['halt_id']} stops every new call)")
            assert _ok(await operator.call_tool("reversi.resume", {})) == {"lifted": 1}
            assert not (await agent.call_tool("echo", {"text": "x"})).is_error

    cancels = shop.calls("cancel_order")
    assert [c["arguments"]["order_id"] for c in cancels] == ["a2", "a2", "a1"]  # a2 failed once, then again
    assert [c["meta"]["reversi/idempotency_key"] for c in cancels] == [
        _key("run_ops", 1, "cancel_order"),
        _key("run_ops", 1, "cancel_order"),
        _key("run_ops", 0, "cancel_order"),
    ]
    assert [c["arguments"] for c in shop.calls("get_order")] == [{"order_id": "a2"}, {"order_id": "a1"}]
    assert {k: o["status"] for k, o in shop.orders().items()} == {"a1": "canceled", "a2": "canceled"}


async def test_a_plan_with_no_manifests_in_force_says_how_to_give_one(tmp_path: Path, shop: Shop) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--run-id", "run_bare") as agent:
        await agent.call_tool("create_order", {"order_id": "a1", "amount": 3})
    async with gateway("operator", "--upstream", shop.flag(), "--db", db) as operator:
        plan = _ok(await operator.call_tool("reversi.plan_rollback", {"run_id": "run_bare"}))
    assert plan["actions"][0]["kind"] == "unmanifested"
    assert plan["notes"] == ["no manifests in force: start the gateway with -m FILE, or set manifests: in "
                             "reversi.yaml or REVERSI_MANIFEST"]


async def test_an_operator_undoes_the_steps_of_a_run_several_at_once(tmp_path: Path, shop: Shop,
                                                                    shop_manifest: str) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    common = ["--upstream", shop.flag(), "--db", db, "-m", shop_manifest]
    async with gateway(*common, "--run-id", "run_many") as agent:
        for n in range(6):
            await agent.call_tool("create_order", {"order_id": f"o{n}", "amount": n + 1})
        async with gateway("operator", *common) as operator:
            for bad in (0, 65, "4", True, 1.5):
                refused = await operator.call_tool("reversi.execute_rollback",
                                                   {"run_id": "run_many", "confirm": True, "concurrency": bad})
                assert refused.is_error, bad
            assert shop.calls("cancel_order") == []

            report = _ok(await operator.call_tool("reversi.execute_rollback",
                                                  {"run_id": "run_many", "confirm": True, "concurrency": 4}))

    assert report["compensated"] == [5, 4, 3, 2, 1, 0] and report["complete"] is True
    assert sorted(c["meta"]["reversi/idempotency_key"] for c in shop.calls("cancel_order")) == sorted(
        _key("run_many", n, "cancel_order") for n in range(6))
    assert {o["status"] for o in shop.orders().values()} == {"canceled"}

"""Rollbacks of many runs: an incident is a key, an actor or a time window, not a run. One plan walks every
covered step newest first across runs; the rollback undoes them in an order that never undoes a step
while something that depends on it, in any run, still stands; other runs are left alone; a re-run
undoes nothing twice; `contain` stops new calls first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.errors import BadInput, Halted

MANIFEST = """\
version: 1
tools:
  shop.set_price:
    capture: {tool: shop.get_price, args: {sku: "$args.sku"}}
    resources: ["price:${args.sku}"]
    compensation: {tool: shop.set_price, args: {sku: "$args.sku", price: "$before.price"}}
  shop.get_price: {effect: read}
  shop.log: {compensation: {tool: shop.unlog, args: {line: "$args.line"}}}
"""


class Shop:
    def __init__(self, **prices: int) -> None:
        self.prices = dict(prices)
        self.log: list[str] = []
        self.undos: list[str] = []

    def get_price(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"price": self.prices[args["sku"]]}

    def set_price(self, sku: str, price: int) -> str:
        self.prices[sku] = price
        return "ok"

    def write_log(self, line: str) -> str:
        self.log.append(line)
        return "ok"

    def undo(self, call: dict[str, Any]) -> Any:
        self.undos.append(call["idempotency_key"])
        if call["tool"] == "shop.unlog":
            self.log.remove(call["args"]["line"])
            return "ok"
        return self.set_price(**call["args"])


@pytest.fixture
def shop_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(MANIFEST)
    return path


def opened(db_url: str, manifest: Path, principal: str) -> reversi.Ledger:
    return reversi.open(db_url, manifests=[str(manifest)], principal=principal)


def price(run: reversi.Run, shop: Shop, sku: str, value: int) -> None:
    run.call("shop.set_price", {"sku": sku, "price": value}, shop.set_price, capture=shop.get_price)


def test_everything_a_key_did_is_undone_across_its_runs_in_a_safe_order(db_url: str, shop_yaml: Path) -> None:
    shop = Shop(A=500, B=10)
    with opened(db_url, shop_yaml, "leaky") as leaky, opened(db_url, shop_yaml, "honest") as honest:
        r0, r1 = leaky.start_run(actor="bot"), leaky.start_run(actor="bot")
        price(r0, shop, "A", 600)  # r0 first, then r1 over the same price, then r0 again elsewhere
        price(r1, shop, "A", 700)
        r0.call("shop.log", {"line": "hello"}, shop.write_log)
        other = honest.start_run(actor="person")
        price(other, shop, "B", 20)

        selection = reversi.Selection(key="leaky")
        plan = leaky.plan_scope(selection)
        assert plan.run_ids == [r0.id, r1.id]  # newest run first: r0 has the newest step
        assert [(run, a.step, a.kind.value) for run, a in plan.actions] == [
            (r0.id, 1, "compensate"), (r1.id, 0, "compensate"), (r0.id, 0, "compensate")]
        assert plan.fully_reversible
        assert plan.to_dict()["actions"][1] == plan.actions[1][1].to_dict() | {"run": r1.id}

        report = leaky.rollback_scope(selection, shop.undo)
        assert report.complete and shop.prices == {"A": 500, "B": 20} and shop.log == []
        data = report.to_dict()
        assert data["compensated"] == sorted([{"run": r0.id, "step": 0}, {"run": r0.id, "step": 1},
                                              {"run": r1.id, "step": 0}], key=lambda d: (d["run"], d["step"]))
        assert set(data["reports"]) == {r0.id, r1.id} and other.steps()[0].status.value == "succeeded"

        again = leaky.rollback_scope(selection, shop.undo)  # a re-run finds it done and undoes nothing twice
        assert again.complete and again.to_dict()["compensated"] == []
        assert len(again.to_dict()["already_undone"]) == 3
        assert len(shop.undos) == len(set(shop.undos)) == 3


def test_a_run_outside_the_scope_that_stands_holds_its_steps_back(db_url: str, shop_yaml: Path) -> None:
    shop = Shop(A=500)
    with opened(db_url, shop_yaml, "leaky") as leaky, opened(db_url, shop_yaml, "honest") as honest:
        mine = leaky.start_run()
        price(mine, shop, "A", 600)
        theirs = honest.start_run()
        price(theirs, shop, "A", 700)
        plan = leaky.plan_scope(reversi.Selection(key="leaky"))
        ((run, action),) = plan.actions
        assert (run, action.kind.value) == (mine.id, "defer")
        assert [d.to_dict() for d in action.blocked_by_runs] == [{"run": theirs.id, "step": 0, "resource": "price:A"}]
        report = leaky.rollback_scope(reversi.Selection(key="leaky"), shop.undo)
        assert not report.complete and shop.prices["A"] == 700 and shop.undos == []
        assert report.to_dict()["deferred"][0]["run"] == mine.id


def test_a_time_window_and_a_tool_glob_cover_part_of_a_run(db_url: str, shop_yaml: Path) -> None:
    shop = Shop(A=1, B=1)
    with opened(db_url, shop_yaml, "p") as ledger:
        run = ledger.start_run()
        price(run, shop, "A", 2)
        since = run.steps()[0].at
        price(run, shop, "B", 2)
        run.call("shop.log", {"line": "x"}, shop.write_log)
        later = run.steps()[1].at
        plan = ledger.plan_scope(reversi.Selection(since=later, tool="shop.set_*"))
        assert [(a.step, a.kind.value) for _, a in plan.actions] == [(1, "compensate")]
        report = ledger.rollback_scope(reversi.Selection(since=later, tool="shop.set_*"), shop.undo)
        assert report.complete and shop.prices == {"A": 2, "B": 1} and shop.log == ["x"]
        assert since < later


def test_a_kept_step_that_depends_on_a_covered_one_holds_it_back(db_url: str, shop_yaml: Path) -> None:
    shop = Shop(A=1)
    with opened(db_url, shop_yaml, "p") as ledger:
        run = ledger.start_run()
        price(run, shop, "A", 2)
        run.call("shop.log", {"line": "x"}, shop.write_log, depends_on=[0])
        plan = ledger.plan_scope(reversi.Selection(tool="shop.set_*"))
        assert [(a.step, a.kind.value, a.blocked_by) for _, a in plan.actions] == [(0, "defer", (1,))]


def test_contain_halts_the_scope_and_revokes_the_key_first(db_url: str, shop_yaml: Path) -> None:
    shop = Shop(A=1)
    with opened(db_url, shop_yaml, "admin") as admin:
        _, secret = admin.create_key("leaky", "agent")
        with opened(db_url, shop_yaml, "leaky") as leaky:
            run = leaky.start_run(actor="bot-7")
            price(run, shop, "A", 2)
        report = admin.rollback_scope(reversi.Selection(key="leaky", actor="bot-7"), shop.undo, contain=True)
        assert report.complete and shop.prices["A"] == 1
        assert [line.split(" ", 2)[1] for line in report.contained] == ["halt", "key"]
        assert admin.list_keys()[0].revoked_at is not None
        with opened(db_url, shop_yaml, "leaky") as leaky, pytest.raises(Halted):
            price(leaky.start_run(actor="bot-7"), shop, "A", 3)
        with pytest.raises(BadInput, match="labels and times"):
            admin.rollback_scope(reversi.Selection(labels=(("team", "x"),)), shop.undo, contain=True)
        assert secret


@pytest.mark.parametrize("options", [{"concurrency": 0}, {"concurrency": 65}, {"concurrency": True},
                                     {"concurrency": "4"}, {"retry": {"attempts": 11}}], ids=str)
def test_bad_rollback_options_are_refused_before_anything_is_contained(
    db_url: str, shop_yaml: Path, options: dict[str, Any]
) -> None:
    shop = Shop(A=1)
    with opened(db_url, shop_yaml, "admin") as admin:
        admin.create_key("leaky", "agent")
        with pytest.raises(BadInput):
            admin.rollback_scope(reversi.Selection(key="leaky"), shop.undo, contain=True, **options)
        assert admin.halts() == [] and admin.list_keys()[0].revoked_at is None


def test_a_selection_needs_a_criterion_and_printable_text() -> None:
    with pytest.raises(BadInput, match="needs a scope"):
        reversi.Selection()
    with pytest.raises(BadInput, match="printable"):
        reversi.Selection(actor="bot\x1b[2J")
    with pytest.raises(BadInput, match="before since"):
        reversi.Selection(since="2026-12-02T00:00:00.000000Z", until="2026-12-01T00:00:00.000000Z")

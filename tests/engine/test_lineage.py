"""Runs that touch the same resources: a step is deferred while a later step of another run that touched
the same resource still stands, the plan says which run blocks it and through what, and rolling back
the later run first lets the earlier one go back to the start (a generic `capture` manifest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.core.resources import resource_key
from reversi.engine.keys import Principal, Role
from reversi.errors import NotCompensable

MANIFEST = """\
version: 1
tools:
  shop.set_price:
    capture: {tool: shop.get_price, args: {sku: "$args.sku"}}
    resources: ["price:${args.sku}"]
    compensation: {tool: shop.set_price, args: {sku: "$args.sku", price: "$before.price"}}
  shop.get_price: {effect: read, resources: ["price:${args.sku}"]}
  shop.note:
    resources: ["note:${result.id}"]
    compensation: {tool: shop.delete_note, args: {id: "$result.id"}}
  shop.untracked:
    capture: {tool: shop.get_price, args: {sku: "$args.sku"}}
    compensation: {tool: shop.set_price, args: {sku: "$args.sku", price: "$before.price"}}
"""


class Shop:
    """Prices by SKU, changed and read back like a tool server."""

    def __init__(self, **prices: int) -> None:
        self.prices = dict(prices)
        self.notes: dict[str, str] = {}

    def get_price(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"price": self.prices[args["sku"]]}

    def set_price(self, sku: str, price: int) -> str:
        self.prices[sku] = price
        return "ok"

    def note(self, text: str) -> dict[str, str]:
        note_id = f"n{len(self.notes)}"
        self.notes[note_id] = text
        return {"id": note_id}

    def undo(self, call: dict[str, Any]) -> Any:
        if call["tool"] == "shop.delete_note":
            return self.notes.pop(call["args"]["id"], None)
        return self.set_price(**call["args"])


@pytest.fixture
def ledger(db_url: str, tmp_path: Path) -> Any:
    path = tmp_path / "shop.yaml"
    path.write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(path)]) as opened:
        yield opened


def set_price(run: reversi.Run, shop: Shop, price: int, tool: str = "shop.set_price") -> None:
    run.call(tool, {"sku": "A1", "price": price}, shop.set_price, capture=shop.get_price)


def test_a_later_run_on_the_same_resource_defers_the_earlier_and_the_plan_names_it(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500)
    first, second = ledger.start_run(run_id="run_0"), ledger.start_run(run_id="run_1")
    set_price(first, shop, 600)
    set_price(second, shop, 700)

    plan = first.plan()
    (action,) = plan.actions
    assert (action.kind.value, action.blocked_by) == ("defer", ())
    assert [d.to_dict() for d in action.blocked_by_runs] == [{"run": "run_1", "step": 0, "resource": "price:A1"}]
    assert action.reason == "blocked by run_1 step 0 changed price:A1 after this step"
    assert not plan.fully_reversible
    assert plan.to_dict()["actions"][0]["blocked_by_runs"] == [{"run": "run_1", "step": 0, "resource": "price:A1"}]
    assert second.plan().fully_reversible  # nothing later depends on run_1's step

    report = first.rollback(shop.undo)  # the earlier run alone: nothing is undone, nothing is lost
    assert shop.prices["A1"] == 700 and report.to_dict()["deferred"] == [
        {"step": 0, "blocked_by": [], "blocked_by_runs": [{"run": "run_1", "step": 0, "resource": "price:A1"}]}]

    second.rollback(shop.undo)  # the later one first: 700 → 600, then the earlier one may go: 600 → 500
    assert first.plan().actions[0].kind.value == "compensate"
    assert first.rollback(shop.undo).complete and shop.prices["A1"] == 500


def test_steps_without_resources_and_reads_change_nothing(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500)
    first, second, third = (ledger.start_run() for _ in range(3))
    first.call("shop.untracked", {"sku": "A1", "price": 600}, shop.set_price, capture=shop.get_price)
    second.call("shop.untracked", {"sku": "A1", "price": 700}, shop.set_price, capture=shop.get_price)
    third.call("shop.get_price", {"sku": "A1"}, lambda sku: shop.get_price("", {"sku": sku}))
    set_price(first, shop, 650)
    # a read of the same resource, later, holds nothing back: only writes touch resources
    third.call("shop.get_price", {"sku": "A1"}, lambda sku: shop.get_price("", {"sku": sku}))
    assert first.plan().fully_reversible and second.plan().fully_reversible


def test_within_a_run_a_later_step_on_the_resource_that_stands_holds_back_the_earlier(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500)
    run = ledger.start_run()
    set_price(run, shop, 600)
    step = run.begin("shop.set_price", {"sku": "A1", "price": 700})
    step.uncertain("timed out")  # it may have changed the price: the first undo would put back a guess
    plan = run.plan()
    assert [(a.step, a.kind.value, a.blocked_by) for a in plan.actions] == [(1, "unresolved", ()), (0, "defer", (1,))]


def test_ids_a_step_made_are_resources_and_other_tenants_never_block(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500)
    mine, theirs = ledger.start_run(tenant="acme"), ledger.start_run(tenant="globex")
    set_price(mine, shop, 600)
    set_price(theirs, shop, 700)  # same text, other tenant: not the same resource
    assert mine.plan().fully_reversible
    note = mine.call("shop.note", {"text": "hi"}, shop.note)
    assert note == {"id": "n0"}
    with ledger.store.read() as q:  # what the journal keeps: hashes, not the resources' text
        touches = q.run_touches([mine.id])
    secret = ledger.store.secret("masking")
    assert {t.key for t in touches} == {resource_key(secret, "acme", r) for r in ("price:A1", "note:n0")}
    assert all("A1" not in t.key and "n0" not in t.key for t in touches)


def test_a_remote_worker_cannot_claim_a_step_another_run_stands_on(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500)
    first, second = ledger.start_run(run_id="run_0"), ledger.start_run(run_id="run_1")
    set_price(first, shop, 600)
    set_price(second, shop, 700)
    with pytest.raises(NotCompensable, match="still has a standing dependent: run_1 step 0 changed price:A1"):
        first.begin_compensation(0)
    work = second.begin_compensation(0)
    second.complete_compensation(work, ok=True, result="ok")
    assert first.begin_compensation(0).call["args"] == {"sku": "A1", "price": 500}


def test_a_hostile_resource_text_stays_on_its_line(ledger: reversi.Ledger) -> None:
    shop = Shop(**{"A1\nstep 9  shop.set_price  compensate -> x\x1b[2J": 500})
    sku = next(iter(shop.prices))
    first, second = ledger.start_run(run_id="run_0"), ledger.start_run(run_id="run_1")
    for run, value in ((first, 600), (second, 700)):
        run.call("shop.set_price", {"sku": sku, "price": value}, shop.set_price, capture=shop.get_price)
    text = first.plan().to_text()
    assert len(text.splitlines()) == 2 and "\\nstep 9" in text  # the step's line, and the verdict
    assert first.plan().actions[0].blocked_by_runs[0].resource == f"price:{sku}"  # exact in JSON


def test_a_listings_plans_see_each_other_and_the_runs_beyond_the_page(ledger: reversi.Ledger) -> None:
    shop = Shop(A1=500, B2=5)
    first, second, third = (ledger.start_run(run_id=f"run_{i}") for i in range(3))
    set_price(first, shop, 600)
    set_price(second, shop, 700)  # on the page: holds run_0 back
    second.call("shop.set_price", {"sku": "B2", "price": 6}, shop.set_price, capture=shop.get_price)
    third.call("shop.set_price", {"sku": "B2", "price": 7}, shop.set_price, capture=shop.get_price)  # beyond it
    door = ledger.for_principal(Principal("ops", Role.OPERATOR))
    page = door.plans([ledger.run_record("run_0"), ledger.run_record("run_1")])
    assert [(p.run_id, p.fully_reversible) for p in page] == [("run_0", False), ("run_1", False)]
    assert [d.run_id for d in page[0].actions[0].blocked_by_runs] == ["run_1"]
    assert [d.run_id for a in page[1].actions for d in a.blocked_by_runs] == ["run_2"]
    assert [p.to_dict() for p in page] == [first.plan().to_dict(), second.plan().to_dict()]  # as each alone

"""The runs list (status, filters, triage, live refresh) and the halts page, as each role sees them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from reversi.engine.keys import create_key, revoke_key
from reversi.server.console import views

from .conftest import Console, record_run, sign_in


def row_of(page: Any, run_id: str) -> Any:
    return page.locator(f"tr:has(a[href=\"/runs/{run_id}\"])")


def test_the_runs_list_says_what_rollbacks_and_approvals_did(console: Console, page: Any) -> None:
    agent = console.ledger.acting_as("billing-agent")
    done = agent.start_run(actor="billing-agent")
    done.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    done.rollback(compensate=lambda call: {"ok": True})
    waiting = agent.start_run(actor="billing-agent")
    waiting.begin("bank.transfer", {"amount": 2}).succeeded({"id": "tr_2"})
    waiting.rollback(compensate=lambda call: {"ok": True})  # asks for the transfer's undo to be approved
    partly = agent.start_run(actor="billing-agent")
    partly.begin("mail.send", {"to": "x@y.z"}).succeeded({})
    partly.begin("stripe.create_charge", {"amount": 3}).succeeded({"id": "ch_3"})
    partly.rollback(compensate=lambda call: {"ok": True})
    standing = agent.start_run(actor="billing-agent")
    standing.begin("stripe.create_charge", {"amount": 4}).succeeded({"id": "ch_4"})
    sign_in(page, console, console.operator_key)
    expected = {done.id: "rolled back", waiting.id: "awaiting approval", partly.id: "partly rolled back",
                standing.id: "standing"}
    for run_id, status in expected.items():
        assert row_of(page, run_id).locator(".badge").first.inner_text() == status, run_id
    assert "1 approval pending" in row_of(page, waiting.id).inner_text()
    assert page.locator("#nav-approvals .count").inner_text().startswith("1")


def test_filters_are_forgiving_and_find_runs_needing_attention(console: Console, page: Any) -> None:
    unresolved = record_run(console)  # step 2 timed out
    other = console.ledger.acting_as("support-agent").start_run(actor="support-agent", labels={"ticket": "T-9"})
    other.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    sign_in(page, console, console.operator_key)
    assert "ticket=T-9" in row_of(page, other.id).inner_text()  # labels are shown
    page.fill("form.filters input[name=actor]", "  Billing ")
    page.click("form.filters button[type=submit]")
    expect(row_of(page, unresolved)).to_be_visible()
    assert row_of(page, other.id).count() == 0
    page.goto(f"{console.url}/")
    page.fill("form.filters input[name=q]", other.id[4:14].upper())  # part of a run id, any case
    page.click("form.filters button[type=submit]")
    expect(row_of(page, other.id)).to_be_visible()
    assert row_of(page, unresolved).count() == 0
    page.goto(f"{console.url}/")
    triage = page.locator("nav.triage")
    assert re.search(r"Needs attention\s*1", triage.inner_text()) and re.search(r"Outcome unknown\s*1",
                                                                                 triage.inner_text())
    triage.locator("a:has-text('Needs attention')").click()
    expect(row_of(page, unresolved)).to_be_visible()
    assert row_of(page, other.id).count() == 0


def test_the_live_refresh_says_when_it_pauses_and_when_the_session_ended(
        console: Console, page: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(views.REFRESH_MS, "runs", 300)
    run_id = record_run(console)
    row, key = create_key(console.ledger.store, "night-operator", "operator")
    sign_in(page, console, key)
    notice = page.locator("#runs-notice")
    page.route(re.compile(r"fragment=rows"), lambda route: route.abort())
    expect(notice).to_contain_text("Refresh paused")
    page.unroute(re.compile(r"fragment=rows"))
    console.ledger.get_run(run_id).resolve(2, "failed", note="no such charge", actor="olu")
    expect(row_of(page, run_id)).not_to_contain_text("needs attention", timeout=15_000)
    expect(notice).to_be_hidden()
    record_run(console)  # something active again: the list keeps refreshing
    page.reload()
    revoke_key(console.ledger.store, row.key_id)
    expect(notice).to_contain_text("Your session ended")
    assert page.locator("#run-rows #key").count() == 0 and "Sign in" not in page.locator("table.runs").inner_text()


def test_a_tenants_operator_sees_every_halt_that_applies_to_it_read_only(console: Console, page: Any) -> None:
    everywhere = console.ledger.add_halt("stop everything", by="dana")
    acme = console.ledger.add_halt("acme's incident", tenant="acme", by="dana")
    console.ledger.add_halt("not acme's", tenant="globex", by="dana")
    _, key = create_key(console.ledger.store, "acme-admin", "admin", "acme")
    sign_in(page, console, key, "/halts")
    table = page.locator("table.halts").inner_text()
    assert "stop everything" in table and "acme's incident" in table and "not acme's" not in table
    assert page.locator(f"tr:has-text('{everywhere.halt_id}') button:text('Lift')").count() == 0
    assert page.locator(f"tr:has-text('{acme.halt_id}') button:text('Lift')").count() == 1
    assert page.locator("#nav-halts .count").inner_text().startswith("2")


def test_a_halt_of_everything_asks_to_be_confirmed(console: Console, page: Any) -> None:
    sign_in(page, console, console.admin_key, "/halts")
    page.fill("form.add-halt input[name=reason]", "all hands")
    page.click("form.add-halt button[type=submit]")
    expect(page.locator("form.add-halt .error")).to_contain_text("a halt with no scope stops every new call")
    assert console.ledger.halts() == []
    assert page.locator("form.add-halt input[name=reason]").input_value() == "all hands"
    page.check("form.add-halt input[name=everything]")
    page.click("form.add-halt button[type=submit]")
    expect(page.locator("table.halts")).to_contain_text("everything")
    assert [h.reason for h in console.ledger.halts()] == ["all hands"]

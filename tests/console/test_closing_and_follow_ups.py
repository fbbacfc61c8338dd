"""Issue 30 in the console: the runs list's *Closing soon* (the runs whose undo windows close within a
time, with the time left, as `reversi runs --expiring`), and closing a follow-up from the run page, with
the console's CSRF, roles and HTML errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.hostile.store_state import store_state

from reversi.core.times import format_time
from reversi.engine.keys import create_key
from reversi.server.console.forms import CLOSED_IN_THE_CONSOLE

from .conftest import Console, sign_in
from .test_forms import signed_in_client


def _held(console: Console, who: str, tenant: str, *hours: float) -> str:
    """A run of `who` with a bank hold for each of `hours`, whose undo window closes that many hours from now."""
    run = console.ledger.acting_as(who).start_run(actor=who, tenant=tenant)
    now = datetime.now(UTC)
    for h in hours:
        until = format_time(now + timedelta(hours=h))
        run.begin("bank.hold", {"amount": 5}).succeeded({"id": f"h{h}", "releasable_until": until})
    return str(run.id)


def test_closing_soon_lists_the_runs_whose_undo_windows_close_with_the_time_left(
    console: Console, page: Any,
) -> None:
    soon = _held(console, "billing-agent", "acme", 30, 2)
    later = _held(console, "billing-agent", "acme", 40)
    theirs = _held(console, "other-agent", "other", 1)
    sign_in(page, console, console.operator_key)
    page.locator("nav.triage a#closing-soon").click()
    page.wait_for_url(re.compile(r"expiring=24h"))
    rows = page.locator("table.closing tbody tr")
    expect(rows).to_have_count(2)
    assert theirs in rows.nth(0).inner_text() and soon in rows.nth(1).inner_text()  # the soonest first
    first = rows.nth(1).inner_text()
    assert re.search(r"\b1h 59m\b|\b2h 0m\b", first), first
    assert "step 1 bank.hold" in first and "step 0" not in first  # 30 h is not within 24 h
    assert re.search(r"Closing soon\s*2", page.locator("nav.triage").inner_text())

    page.fill("#closing-filter input[name=expiring]", "2d")
    page.click("#closing-filter button[type=submit]")
    page.wait_for_url(re.compile(r"expiring=2d"))
    expect(rows).to_have_count(3)
    assert later in rows.nth(2).inner_text() and "step 0 bank.hold" in rows.nth(1).inner_text()
    rows.nth(1).locator("a").click()
    page.wait_for_url(console.url + f"/runs/{soon}")

    _, confined = create_key(console.ledger.store, "acme-ops", "operator", "acme")
    with signed_in_client(console, confined) as (client, _):
        shown = client.get("/?expiring=7d")
        assert shown.status_code == 200 and soon in shown.text and later in shown.text and theirs not in shown.text
    with signed_in_client(console, console.agent_key) as (client, _):
        shown = client.get("/?expiring=7d")  # an agent sees its own runs
        assert soon in shown.text and theirs not in shown.text


def test_a_bad_closing_time_is_said_on_the_page_and_changes_nothing(console: Console) -> None:
    _held(console, "billing-agent", "acme", 2)
    before = store_state(console.ledger)
    with signed_in_client(console, console.operator_key) as (client, _):
        for value, said in (("soon", "closing within &#39;soon&#39;: expected a duration like 90d, 12h or 30m"),
                            ("-1h", "expected a duration"), ("", "expected a duration"),
                            ("9" * 5000 + "d", "too long to be a duration"),
                            ("999999999999w", "too long to be a duration")):
            answer = client.get("/", params={"expiring": value})
            assert answer.status_code == 400, value[:20]
            assert answer.headers["content-type"].startswith("text/html")
            assert said in answer.text and "9" * 41 not in answer.text, value[:20]
        assert client.get("/", params={"expiring": "999999999d"}).status_code == 200  # every window
    assert store_state(console.ledger) == before


def _stayed(console: Console) -> str:
    """A run whose rollback left two sent emails, each with an open follow-up."""
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("mail.send", {"to": "ada@example.com", "password": "hunter2-Sup3rS3cret"}).succeeded({"id": "m1"})
    run.begin("mail.send", {"to": "bob@example.com"}).succeeded({"id": "m2"})
    run.rollback()
    return str(run.id)


def test_an_operator_closes_a_follow_up_from_the_run_page_with_or_without_a_note(
    console: Console, page: Any,
) -> None:
    run_id = _stayed(console)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")
    first = page.locator("#follow-up-0")
    first.locator("input[name=note]").fill("wrote to Ada again")
    first.locator("button:has-text('Close follow-up')").click()
    expect(page.locator("#follow-up-0")).to_contain_text("closed by olu: wrote to Ada again")
    assert page.locator("#follow-up-0 form").count() == 0
    page.locator("#follow-up-1 button:has-text('Close follow-up')").click()
    expect(page.locator("#follow-up-1")).to_contain_text(f"closed by olu: {CLOSED_IN_THE_CONSOLE}")
    assert "hunter2" not in page.content()
    closed = {f.step: (f.status, f.closed_by) for f in console.ledger.get_run(run_id).follow_ups()}
    assert closed == {0: ("closed", "olu"), 1: ("closed", "olu")}


def test_closing_a_follow_up_needs_the_role_the_tenant_and_the_token(console: Console, page: Any) -> None:
    run_id = _stayed(console)
    path = f"/runs/{run_id}/steps/0/follow-up/close"
    _, elsewhere = create_key(console.ledger.store, "other-ops", "operator", "other")
    before = store_state(console.ledger)
    sign_in(page, console, console.agent_key, f"/runs/{run_id}")  # the run's own agent reads it, closes nothing
    expect(page.locator("#follow-up-0")).to_contain_text("Write to ada@example.com again")
    assert page.locator("#follow-up-0 form").count() == 0
    for key in (console.agent_key, elsewhere):
        with signed_in_client(console, key) as (client, csrf):
            answer = client.post(path, data={"csrf": csrf, "note": "mine now"})
            assert answer.status_code == 303
            assert client.get(f"/runs/{run_id}").status_code in (403, 200)
    with signed_in_client(console, console.operator_key) as (client, csrf):
        for token in (None, "", "x" * 40):
            answer = client.post(path, data={"note": "n"} | ({"csrf": token} if token is not None else {}))
            assert answer.status_code == 403 and "this form has expired" in answer.text
            assert answer.headers["content-type"].startswith("text/html")
        for bad in ("abc", "-1", "9" * 5000, "1" * 10):
            answer = client.post(f"/runs/{run_id}/steps/{bad}/follow-up/close", data={"csrf": csrf},
                                 headers={"Referer": console.url + f"/runs/{run_id}"})
            assert answer.status_code == 303, bad[:20]
            assert "step must be a step number" in client.get(f"/runs/{run_id}").text, bad[:20]
        assert store_state(console.ledger) == before
        none = client.post(f"/runs/{run_id}/steps/7/follow-up/close", data={"csrf": csrf})
        assert none.status_code == 303 and none.headers["location"].endswith("#follow-up-7")
        assert f"step 7 of {run_id} has no follow-up" in client.get(f"/runs/{run_id}").text
        assert client.post(path, data={"csrf": csrf, "note": "done"}).status_code == 303
        again = client.post(path, data={"csrf": csrf, "note": "again"})
        assert again.status_code == 303
        shown = client.get(f"/runs/{run_id}")
        assert shown.headers["content-type"].startswith("text/html")
        assert "was closed by olu" in shown.text
        assert client.get(path).status_code == 405  # a form's address opened as a page: HTML, not JSON


@pytest.mark.parametrize("console", [True], indirect=True)
def test_asking_the_probes_settles_what_they_can_and_says_what_stays(console: Console, page: Any) -> None:
    run = console.ledger.start_run(actor="billing-agent")
    run.begin("bank.wire", {"ref": "r-1"}).uncertain("timed out")  # the bank has it
    run.begin("bank.wire", {"ref": "r-2"}).uncertain("timed out")  # the bank never saw it
    run.begin("mail.send", {"to": "a@b.c"})  # no probe: stays unresolved
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("#reconcile button[type=submit]")
    said = page.locator("ul.reconciled")
    expect(said).to_contain_text("step 0")
    text = said.inner_text()
    assert re.search(r"step 0 .*succeeded", text) and re.search(r"step 1 .*failed", text), text
    assert re.search(r"step 2 .*unresolved", text), text
    steps = run.steps()
    assert [(s.status.value, s.settled_by) for s in steps[:2]] == [("succeeded", "probe"), ("failed", "probe")]
    assert steps[0].result == {"id": "w-r-1"} and steps[2].status.value == "intended"


def test_without_a_reader_the_console_says_so_and_settles_nothing(console: Console, page: Any) -> None:
    run = console.ledger.start_run(actor="billing-agent")
    run.begin("bank.wire", {"ref": "r-1"}).uncertain("timed out")
    before = store_state(console.ledger)
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("#reconcile button[type=submit]")
    expect(page.locator("#rollback p.error")).to_contain_text("no reader configured")
    assert store_state(console.ledger) == before


def test_the_reconcile_form_needs_an_operator_and_its_csrf_token(console: Console) -> None:
    run = console.ledger.start_run(actor="billing-agent")
    run.begin("bank.wire", {"ref": "r-1"}).uncertain("timed out")
    before = store_state(console.ledger)
    with signed_in_client(console, console.agent_key) as (client, csrf):  # an agent key: not the run's operator
        refused = client.post(f"/runs/{run.id}/reconcile", data={"csrf": csrf})
        assert refused.status_code == 303
        assert client.get(refused.headers["location"]).status_code == 403
    with signed_in_client(console, console.operator_key) as (client, csrf):
        for token in ("forged", ""):
            forged = client.post(f"/runs/{run.id}/reconcile", data={"csrf": token})
            assert forged.status_code == 403 and "text/html" in forged.headers["content-type"]
        elsewhere = client.post("/runs/run_nope/reconcile", data={"csrf": csrf})
        assert elsewhere.status_code == 303 and "run_nope" in client.get("/runs/run_nope").text
    assert store_state(console.ledger) == before

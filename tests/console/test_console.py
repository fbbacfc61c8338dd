"""The console in a real Chromium: sign in, read a run, resolve, approve, roll back, halt."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from .conftest import WAIT_MS, Console, record_run, screenshot_dir, sign_in


def test_an_operator_resolves_approves_and_rolls_back_a_run(console: Console, page: Any, screenshots: Path) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.admin_key)

    row = page.locator(f"tr:has(a[href=\"/runs/{run_id}\"])")
    assert "needs attention" in row.inner_text()
    page.screenshot(path=str(screenshots / "runs-list.png"))
    page.click(f'a[href="/runs/{run_id}"]')
    page.wait_for_url(f"{console.url}/runs/{run_id}")

    plan = page.locator("table.plan").inner_text()
    assert "unresolved" in plan and "outcome unknown" in plan
    assert "needs approval" in plan and "the charge still appears on the customer's statement" in plan

    # A result that is not JSON is refused next to the form, and the step stays unresolved.
    form = page.locator("#step-2 form.resolve")
    form.locator("textarea[name=result]").fill("{ch_2")
    form.locator("input[name=note]").fill("found ch_2 in the Stripe dashboard")
    form.locator("button[type=submit]").click()
    assert "the result is not JSON" in page.locator("#step-2 .error").inner_text()
    form = page.locator("#step-2 form.resolve")
    form.locator("textarea[name=result]").fill('{"id": "ch_2"}')
    form.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"#step-2$"))
    assert "succeeded" in page.locator("#step-2 .badge").inner_text()
    assert "settled by dana: found ch_2 in the Stripe dashboard" in page.locator("#step-2").inner_text()
    page.screenshot(path=str(screenshots / "run-page.png"), full_page=True)

    # Roll back without approving: the transfer waits for its approval, the charges are refunded.
    page.click("button[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "rollback INCOMPLETE" in page.locator("#job-report").inner_text()
    approval = page.locator("#approvals .approval").first
    assert "pending" in approval.inner_text() and "bank.reverse_transfer" in approval.inner_text()

    approval.locator("button:text('Approve')").click()
    page.wait_for_url(re.compile(rf"/runs/{run_id}#apr_"))
    assert "approved" in page.locator("#approvals .approval").first.inner_text()
    page.click("button[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "rollback complete" in page.locator("#job-report").inner_text()
    statuses = {s.index: s.status.value for s in console.ledger.get_run(run_id).steps()}
    assert statuses == {0: "compensated", 1: "compensated", 2: "compensated"}


def test_an_admin_adds_and_lifts_a_scoped_halt(console: Console, page: Any) -> None:
    sign_in(page, console, console.admin_key)
    page.click("nav a:text('Halts')")
    assert "No halts" in page.locator("main").inner_text()
    page.fill("form.add-halt input[name=reason]", "investigating duplicate charges")
    page.fill("form.add-halt input[name=tool]", "stripe.*")
    page.click("form.add-halt button[type=submit]")
    page.wait_for_url(f"{console.url}/halts")
    listed = page.locator("table.halts").inner_text()
    assert "investigating duplicate charges" in listed and "tool=stripe.*" in listed
    assert [h.reason for h in console.ledger.halts()] == ["investigating duplicate charges"]
    page.click("table.halts button:text('Lift')")
    page.wait_for_url(f"{console.url}/halts")
    assert "No halts" in page.locator("main").inner_text()
    assert console.ledger.halts() == []


def test_a_halt_without_a_reason_is_refused_next_to_the_form(console: Console, page: Any) -> None:
    sign_in(page, console, console.admin_key)
    page.goto(console.url + "/halts")
    page.eval_on_selector("form.add-halt input[name=reason]", "e => e.removeAttribute('required')")
    page.fill("form.add-halt input[name=tool]", "github.*")
    page.click("form.add-halt button[type=submit]")
    assert "a halt needs a reason" in page.locator("form.add-halt .error").inner_text()
    assert page.locator("form.add-halt input[name=tool]").input_value() == "github.*"


def test_the_kill_switch_shows_on_every_page(console: Console, page: Any) -> None:
    console.kill_file.write_text("incident 42\n")
    sign_in(page, console, console.operator_key)
    for path in ("/", "/approvals", "/halts"):
        page.goto(console.url + path)
        assert "Kill switch is ON" in page.locator("#kill-switch").inner_text()
        assert "incident 42" in page.locator("#kill-switch").inner_text()


def test_an_agent_key_sees_only_its_own_runs(console: Console, page: Any) -> None:
    mine = record_run(console)
    other = console.ledger.acting_as("support-agent").start_run(actor="support-agent").id
    sign_in(page, console, console.agent_key)
    listed = page.locator("main").inner_text()
    assert mine in listed and other not in listed
    page.goto(f"{console.url}/runs/{other}")
    assert "belongs to another principal" in page.locator("main").inner_text()


def test_a_bad_key_is_refused_at_sign_in(console: Console, page: Any) -> None:
    page.goto(console.url + "/login")
    page.fill("#key", "rvk_nothing")
    page.click("button[type=submit]")
    assert "unknown or revoked key" in page.locator(".error").inner_text()


def test_a_form_posted_without_its_csrf_token_is_refused(console: Console) -> None:
    run_id = record_run(console)
    with httpx.Client(base_url=console.url) as client:
        login = client.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert token is not None
        signed_in = client.post("/login", data={"csrf": token.group(1), "key": console.admin_key})
        assert signed_in.status_code == 303
        cookie = signed_in.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        for data in ({}, {"csrf": "forged"}):
            refused = client.post(f"/runs/{run_id}/steps/2/resolve",
                                  data={**data, "status": "failed", "note": "no such charge"})
            assert refused.status_code == 403
        refused = client.post("/halts", data={"reason": "no token"})
        assert refused.status_code == 403
    assert console.ledger.get_run(run_id).steps()[2].status.value == "uncertain"
    assert console.ledger.halts() == []


def test_an_unknown_decision_on_an_approval_is_not_taken_as_a_denial(console: Console) -> None:
    with httpx.Client(base_url=console.url) as client:
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert token is not None
        client.post("/login", data={"csrf": token.group(1), "key": console.admin_key})
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/approvals").text)  # signing in renews it
        assert token is not None
        run = console.ledger.acting_as("billing-agent").start_run()
        run.begin("bank.transfer", {"amount": 1}).succeeded({"id": "tr_1"})
        run.rollback(compensate=lambda call: {"ok": True})  # asks for the compensation's approval
        [approval] = console.ledger.approvals(status="pending")
        answer = client.post(f"/approvals/{approval.approval_id}/maybe", data={"csrf": token.group(1), "note": "x"})
        assert answer.status_code == 404
    assert console.ledger.approvals(status="pending") == [approval]


def test_the_runs_list_refreshes_itself_while_a_run_is_active(console: Console, page: Any) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.operator_key)
    row = page.locator(f"tr:has(a[href=\"/runs/{run_id}\"])")
    assert "needs attention" in row.inner_text()
    console.ledger.get_run(run_id).resolve(2, "failed", note="no such charge downstream", actor="olu")
    expect(row).not_to_contain_text("needs attention", timeout=WAIT_MS)
    assert "standing" in row.inner_text()


def test_pages_refuse_other_sites_frames_and_scripts(console: Console, page: Any) -> None:
    """A console inside another site's frame would let that site steer the operator's clicks onto its
    buttons: every page forbids framing, and loads scripts and styles from this server only."""
    answer = httpx.get(console.url + "/login")
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    assert answer.headers["x-frame-options"] == "DENY"
    page.set_content(f'<iframe id="console" src="{console.url}/login"></iframe>')
    page.wait_for_timeout(500)  # the frame's navigation is refused, not left pending
    [framed] = [f for f in page.frames if f != page.main_frame]
    assert framed.query_selector("#key") is None
    sign_in(page, console, console.admin_key)  # and the console itself still works under its policy
    assert page.locator("h1").count() >= 1


def test_the_session_cookie_is_secure_when_the_console_is_reached_over_https(console: Console) -> None:
    """Behind a TLS proxy on this machine (uvicorn trusts its X-Forwarded-Proto), the browser must never
    send the session cookie in the clear; over plain http it must still be sent."""
    for proto, secure in (("https", True), ("http", False)):
        first_visit = httpx.get(console.url + "/login", headers={"X-Forwarded-Proto": proto})
        cookie = first_visit.headers["set-cookie"].lower()
        assert "httponly" in cookie and ("; secure" in cookie) is secure, (proto, cookie)


def test_screenshots_go_to_the_docs_only_when_asked_for(tmp_path: Path) -> None:
    assert screenshot_dir(tmp_path / "a", update=False) == tmp_path / "a"
    assert screenshot_dir(tmp_path / "b", update=True).parts[-2:] == ("docs", "screenshots")

"""The rollback panel: what a rollback would do, its confirmation, its live progress and its report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from tests.server.conftest import wait_for

from reversi.engine import jobs

from .conftest import WAIT_MS, Console, record_run, sign_in


def job_count(console: Console, run_id: str) -> int:
    try:
        jobs.latest_job(console.ledger.store, run_id)
    except Exception:
        return 0
    return 1


def test_the_final_report_shows_everything_the_rollback_did_not_do(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})  # 0: deferred by 3
    run.begin("stripe.create_charge", {"amount": 2}).succeeded({"id": "ch_1"})  # 1: compensated
    run.begin("bank.transfer", {"amount": 3}).succeeded({"id": "tr_2"})  # 2: awaiting approval
    run.begin("stripe.create_charge", {"amount": 4}, depends_on=[0]).uncertain("timed out")  # 3: unresolved
    run.begin("mail.send", {"to": "a@b.c"}).succeeded({})  # 4: unrecoverable
    run.begin("x.unknown", {}).succeeded({})  # 5: unmanifested
    run.begin("flaky.create", {}).succeeded({"id": "f_6"})  # 6: failed
    run.begin("crm.update", {}).succeeded({"id": "c_7"})  # 7: compensated, not read back
    sign_in(page, console, console.admin_key, f"/runs/{run.id}")
    page.click("[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    report = page.locator("#job-report").inner_text()
    assert "rollback INCOMPLETE" in report
    for line in ("compensated", "steps 7, 1", "step 6: downstream said no (3 attempts)",
                 "step 4: cannot be undone", "step 0: blocked by step 3", "awaiting approval", "step 2: apr_",
                 "unresolved", "unmanifested", "unverified"):
        assert line in report, line
    assert "The undo failed after 3 attempts: downstream said no" in page.locator("#step-6").inner_text()


def test_progress_shows_one_step_and_the_report_so_far_and_no_verdict_until_done(
        console: Console, page: Any, screenshots: Path) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    run.begin("stripe.create_charge", {"amount": 2}).uncertain("timed out")
    run.begin("stripe.create_charge", {"amount": 3}).succeeded({"id": "ch_2"})
    console.hold_file.write_text("0")  # step 2 is undone, step 0 waits
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    panel = page.locator("#rollback")
    expect(panel).to_contain_text("1 of 2 steps done", timeout=WAIT_MS)  # as the dialog counted: 2 to undo
    expect(panel).to_contain_text("now step 0")
    text = panel.inner_text()
    assert "attempt 1 of 3" in text and "So far" in text and "step 2" in page.locator("#job-report").inner_text()
    assert "INCOMPLETE" not in text and "rollback complete" not in text
    assert "step 1" not in text.split("Last rollback")[1].split("So far")[0]  # one step number, the current one
    assert page.locator("#job[aria-live=polite]").count() == 1
    panel.screenshot(path=str(screenshots / "rollback-progress.png"))
    console.hold_file.unlink()
    expect(panel).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "rollback INCOMPLETE" in page.locator("#job-report").inner_text()


def test_enter_in_the_confirmation_does_not_roll_back_and_it_says_what_the_rollback_does(
        console: Console, page: Any) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.admin_key, f"/runs/{run_id}")
    page.click("[data-open=confirm-rollback]")
    dialog = page.locator("#confirm-rollback")
    assert page.evaluate("document.activeElement.textContent") == "Cancel"
    text = dialog.inner_text()
    assert "undoes 2 steps" in text and "step 1 bank.transfer → bank.reverse_transfer" in text
    assert "step 2 stripe.create_charge: outcome unknown" in text  # what stays
    assert "Approve, in my name, the undo of step 1 (bank.reverse_transfer" in text
    assert [b.inner_text() for b in dialog.locator("button.danger").all()] == [
        "Roll back 2 steps", "Roll back 2 steps and approve"]
    page.keyboard.press("Enter")  # on Cancel, where the dialog puts the focus
    expect(dialog).not_to_be_visible()
    assert job_count(console, run_id) == 0


def test_without_javascript_roll_back_asks_on_a_page_of_its_own(console: Console, browser: Any) -> None:
    run_id = record_run(console)
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, console, console.operator_key, f"/runs/{run_id}")
        page.click("text=Roll back…")
        page.wait_for_url(re.compile(rf"/runs/{run_id}/rollback\??$"))
        assert "undoes 2 steps" in page.locator("main").inner_text()
        page.click("button.danger")
        page.wait_for_url(f"{console.url}/runs/{run_id}#rollback")
        wait_for(lambda: job_count(console, run_id), "the rollback job")
    finally:
        context.close()


def test_the_panel_offers_no_rollback_when_there_is_nothing_to_undo(console: Console, page: Any) -> None:
    empty = console.ledger.acting_as("billing-agent").start_run().id
    run = console.ledger.acting_as("billing-agent").start_run()
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    run.rollback(compensate=lambda call: {"ok": True})
    sign_in(page, console, console.admin_key, f"/runs/{empty}")
    assert "No steps recorded: nothing to roll back" in page.locator("#rollback").inner_text()
    assert page.locator("[data-open=confirm-rollback]").count() == 0
    page.goto(f"{console.url}/runs/{run.id}")
    panel = page.locator("#rollback").inner_text()
    assert "Nothing left to undo" in panel and "Fully reversible" not in panel
    assert page.locator("[data-open=confirm-rollback]").count() == 0


def test_the_panel_shows_the_attempt_a_step_is_on_and_why_the_last_one_failed(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("flaky.create", {}).succeeded({"id": "f_0"})
    console.hold_file.write_text("0:2")  # the first attempt fails, the second waits
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    panel = page.locator("#rollback")
    expect(panel).to_contain_text("attempt 2 of 3", timeout=WAIT_MS)
    assert "the last attempt failed: downstream said no" in panel.inner_text()
    console.hold_file.unlink()
    expect(panel).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "step 0: downstream said no (3 attempts)" in page.locator("#job-report").inner_text()

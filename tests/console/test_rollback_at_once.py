"""The console's rollback of several steps at once: chosen by a link on the confirmation (no input Enter
could submit from), carried by the form, refused when the address names a number out of range."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from reversi.engine.jobs import latest_job

from .conftest import WAIT_MS, Console, sign_in


def record_charges(console: Console, count: int) -> str:
    run = console.ledger.acting_as("billing-agent").start_run(actor="billing-agent", tenant="acme")
    for n in range(count):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    return str(run.id)


def test_an_operator_rolls_back_eight_steps_at_once_from_the_confirmation(console: Console, page: Any) -> None:
    run_id = record_charges(console, 5)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}/rollback")
    form = page.locator("form.rollback-confirm")
    assert "newest first, one at a time" in form.inner_text()
    assert form.locator("input:not([type=hidden]), textarea, select").count() == 0

    form.locator("a:text-is('8')").click()
    page.wait_for_url(f"{console.url}/runs/{run_id}/rollback?concurrency=8")
    form = page.locator("form.rollback-confirm")
    assert "up to 8 at once (never one while a step that depends on it stands)" in form.inner_text()
    assert form.locator("input:not([type=hidden]), textarea, select").count() == 0
    form.locator("button.danger").click()

    page.wait_for_url(f"{console.url}/runs/{run_id}#rollback")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "rollback complete" in page.locator("#job-report").inner_text()
    assert {s.status.value for s in console.ledger.get_run(run_id).steps()} == {"compensated"}
    assert latest_job(console.ledger.store, run_id).row.concurrency == 8


@pytest.mark.parametrize("bad", ["0", "65", "x", "<b>8</b>", "1e1", "٨"])
def test_a_concurrency_out_of_range_in_the_address_is_a_clear_refusal(console: Console, page: Any, bad: str) -> None:
    run_id = record_charges(console, 2)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")

    answer = page.goto(f"{console.url}/runs/{run_id}/rollback?concurrency={bad}")

    assert answer is not None and answer.status == 400
    assert "concurrency must be a whole number from 1 to 64" in page.locator("body").inner_text()
    assert page.locator("main b, section b").count() == 0  # shown as text, never as markup
    assert console.ledger.get_run(run_id).steps()[0].status.value == "succeeded"

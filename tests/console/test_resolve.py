"""The Resolve form names what the undo needs from the result, starts from it, and asks before
accepting a result without it (the step could never be undone)."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from .conftest import Console, record_run, sign_in


def test_a_result_without_what_the_undo_needs_is_accepted_only_once_confirmed(console: Console, page: Any) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")
    form = page.locator("#step-2 form.resolve")
    assert "this step needs from its result: $result.id" in form.inner_text()
    assert json.loads(form.locator("textarea[name=result]").input_value()) == {"id": None}  # to fill in
    form.locator("input[name=note]").fill("found a charge, no id at hand")
    form.locator("textarea[name=result]").fill('{"amount": 900}')
    form.locator("button[type=submit]").click()
    form = page.locator("#step-2 form.resolve")
    expect(form.locator(".error")).to_contain_text("This result does not give $result.id")
    assert console.ledger.get_run(run_id).steps()[2].status.value == "uncertain"
    assert form.locator("textarea[name=result]").input_value() == '{"amount": 900}'  # kept as typed
    form.locator("input[name=accept_missing]").check()
    form.locator("button[type=submit]").click()
    expect(page.locator("#step-2 .badge").first).to_have_text("succeeded")
    assert "compensation arguments unavailable: $result.id" in page.locator("table.plan").inner_text()


def test_the_template_filled_in_resolves_at_once_and_a_failure_needs_no_result(console: Console, page: Any) -> None:
    run_id = record_run(console)
    run = console.ledger.acting_as("billing-agent").get_run(run_id)
    run.begin("stripe.create_charge", {"amount": 5}).uncertain("timed out")  # step 3
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")
    form = page.locator("#step-2 form.resolve")
    form.locator("textarea[name=result]").fill('{"id": "ch_2"}')
    form.locator("input[name=note]").fill("ch_2 in the dashboard")
    form.locator("button[type=submit]").click()
    expect(page.locator("#step-2 .badge").first).to_have_text("succeeded")
    form = page.locator("#step-3 form.resolve")
    form.locator("select[name=status]").select_option("failed")
    form.locator("input[name=note]").fill("no such charge")
    form.locator("button[type=submit]").click()  # the untouched template is no result
    expect(page.locator("#step-3 .badge").first).to_have_text("failed")

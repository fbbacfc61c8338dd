"""Checkpoints on the run page (Chromium): on the step timeline, and a rollback of only what came after one."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from .conftest import WAIT_MS, Console, sign_in


def test_the_timeline_shows_checkpoints_and_the_panel_rolls_back_after_one(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    run.checkpoint("after the first charge")
    run.begin("stripe.create_charge", {"amount": 2}).succeeded({"id": "ch_1"})
    run.checkpoint("<script>alert(1)</script>")  # names are the agent's: shown as text
    run.begin("stripe.create_charge", {"amount": 3}).succeeded({"id": "ch_2"})
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")

    items = page.locator("ol.timeline > li")
    ids = [items.nth(i).get_attribute("id") or "" for i in range(items.count())]
    kinds = [i.split("-")[0] for i in ids]
    assert kinds == ["step", "checkpoint", "step", "checkpoint", "step"]  # newest first
    marks = page.locator("ol.timeline > li.checkpoint")
    assert "<script>alert(1)</script>" in marks.nth(0).inner_text()  # shown as text, so never run
    assert "after step 1" in marks.nth(0).inner_text() and "after step 0" in marks.nth(1).inner_text()

    form = page.locator("form.rollback-after")
    form.locator("select[name=to]").select_option("after the first charge")
    form.locator("button").click()
    main = page.locator("main")
    expect(main).to_contain_text("after checkpoint", timeout=WAIT_MS)
    text = main.inner_text()
    assert "undoes 2 steps" in text and "steps 0 to 0 are kept" in text
    assert "step 2 stripe.create_charge" in text and "step 0 stripe.create_charge" not in text
    page.click("button.danger")
    panel = page.locator("#rollback")
    expect(panel).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    assert "after checkpoint" in panel.inner_text() and "after the first charge" in panel.inner_text()
    assert "rollback complete" in page.locator("#job-report").inner_text()
    assert [s.status.value for s in console.ledger.get_run(run.id).steps()] == ["succeeded", "compensated",
                                                                                "compensated"]

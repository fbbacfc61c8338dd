"""Rolling back many runs from the console (Chromium): a scope's plan across runs, the rollback job with
containment, and its page once done; bad scopes are said on the page, as text."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from tests.server.conftest import wait_for

from .conftest import WAIT_MS, Console, sign_in


def _runs(console: Console) -> list[str]:
    made: list[str] = []
    for actor in ("bot-7", "bot-7", "person"):
        run = console.ledger.acting_as("billing-agent").start_run(actor=actor, tenant="acme")
        run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": f"ch_{len(made)}"})
        made.append(str(run.id))
    return made


def test_an_admin_plans_and_rolls_back_an_actors_runs(console: Console, page: Any) -> None:
    bot_a, bot_b, person = _runs(console)
    sign_in(page, console, console.admin_key, "/scopes")
    form = page.locator("form.scope")
    form.locator("input[name=actor]").fill("bot-7")
    form.locator("button").click()
    plan = page.locator("#scope-plan")
    expect(plan).to_contain_text("2 runs, 2 steps", timeout=WAIT_MS)
    assert bot_a in plan.inner_text() and bot_b in plan.inner_text() and person not in plan.inner_text()

    rollback = page.locator("form.scope-rollback")
    rollback.locator("input[name=reason]").fill("bot-7 went rogue")
    rollback.locator("input[name=reason]").press("Enter")  # submits nothing: only a button decides
    rollback.locator("button.contain").click()
    page.wait_for_url(f"{console.url}/scopes/jobs/*")
    job = page.locator("#scope-job")
    assert "contained: halt" in job.inner_text()
    job_id = page.url.rsplit("/", 1)[1]

    def done() -> bool:
        with console.ledger.store.read() as q:
            row = q.get_scope_job(job_id)
        return row is not None and row.state == "done"

    wait_for(done, "the job of many runs to finish")  # the page does not refresh itself: reload it once done
    page.reload()
    expect(page.locator("#scope-job")).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    assert "rollback complete: 2 steps undone in 2 runs" in page.locator("#scope-job").inner_text()
    statuses = {r: console.ledger.get_run(r).steps()[0].status.value for r in (bot_a, bot_b, person)}
    assert statuses == {bot_a: "compensated", bot_b: "compensated", person: "succeeded"}
    assert [h.reason for h in console.ledger.halts()] == ["bot-7 went rogue"]


def test_a_bad_scope_is_said_on_the_page(console: Console, page: Any) -> None:
    sign_in(page, console, console.operator_key, "/scopes?since=yesterday")
    expect(page.locator("[role=alert]")).to_contain_text("since 'yesterday': expected a duration", timeout=WAIT_MS)
    page.goto(console.url + "/scopes?actor=%3Cscript%3Ealert(1)%3C/script%3E")
    assert page.locator("#scope-plan").inner_text().startswith("0 runs")
    assert page.locator("input[name=actor]").input_value() == "<script>alert(1)</script>"  # as text, not run

"""The console shows sensitive values masked: on the run page (arguments, results, errors, the plan)
and in the approvals queue; the page source holds no clear secret either."""

from __future__ import annotations

from typing import Any

from .conftest import Console, sign_in

SECRETS = ("sk_live_CONSOLEkey123", "pw-for-the-console", "tok_URL_445566", "sess_RES_778899")


def test_the_run_page_and_its_source_show_secrets_masked(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 700, "api_key": SECRETS[0], "password": SECRETS[1],
                                       "webhook": f"https://hooks.example/in?token={SECRETS[2]}"}).succeeded(
        {"id": "ch_1", "session_token": SECRETS[3]})
    run.begin("flaky.create", {"url": "https://api.example"}).failed(f"rejected key {SECRETS[0]}")
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    text, source = page.locator("body").inner_text(), page.content()
    assert [s for s in SECRETS if s in text or s in source] == []
    assert "«sensitive:" in text and "ch_1" in text and "700" in text


def test_a_viewer_sees_runs_and_approvals_with_no_form_and_a_forged_post_is_refused(
    console: Console, page: Any
) -> None:
    from reversi.engine.keys import create_key

    from .conftest import record_run
    from .test_forms import ROLLBACK_FORM, signed_in_client

    viewer = create_key(console.ledger.store, "vic", "viewer")[1]
    run_id = record_run(console)
    sign_in(page, console, viewer, f"/runs/{run_id}")
    assert page.locator(".page-head").count() == 1 and page.locator(ROLLBACK_FORM).count() == 0
    assert page.locator("form[action*='/resolve']").count() == 0
    page.goto(console.url + "/approvals")
    assert page.locator("form.decide").count() == 0
    with signed_in_client(console, viewer) as (client, csrf):
        for path, data in ((f"/runs/{run_id}/rollback", {"confirm": "1"}), ("/halts", {"reason": "x"}),
                           (f"/runs/{run_id}/steps/2/resolve", {"status": "failed", "note": "x"})):
            answer = client.post(path, data={**data, "csrf": csrf}, headers={"Referer": console.url + "/"})
            assert answer.status_code in (303, 403), (path, answer.status_code)  # refused, as the page says
    assert console.ledger.get_run(run_id).snapshot().steps[2].status.value == "uncertain"
    assert console.ledger.halts() == [] and not console.ledger.store.rollback_held(run_id)
    with console.ledger.store.read() as q:
        assert q.latest_job(run_id) is None

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

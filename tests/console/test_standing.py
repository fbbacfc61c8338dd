"""Where a run stands, across two rollback jobs, on the run page (Chromium) and in the API's run: which job
undid each step and when, and what is left with what to do about it."""

from __future__ import annotations

from typing import Any

import httpx
from tests.server.conftest import wait_for

from .conftest import Console, sign_in


def _job(client: httpx.Client, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
    assert client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, **body}).status_code == 202
    job: dict[str, Any] = wait_for(
        lambda: (found := client.get(f"/v1/runs/{run_id}/rollback").json())["state"] == "done" and found,
        "the rollback job to finish")
    return job


def test_the_run_page_shows_which_job_undid_what_and_what_is_left(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    run.begin("flaky.create", {}).succeeded({"id": "f_1"})  # its undo always fails
    run.checkpoint("before the second charge")
    run.begin("stripe.create_charge", {"amount": 2}).succeeded({"id": "ch_2"})
    with httpx.Client(base_url=console.url, headers={"Authorization": f"Bearer {console.operator_key}"},
                      timeout=30) as client:
        first = _job(client, run.id, {"to": "before the second charge"})
        second = _job(client, run.id, {})
        assert first["report"]["compensated"] == [2] and second["report"]["compensated"] == [0]
        assert second["report"]["already_undone"] == [2]
        standing = client.get(f"/v1/runs/{run.id}").json()["where_it_stands"]
    by_step = {s["step"]: s for s in standing["steps"]}
    assert by_step[2]["undone"]["job"] == first["job_id"] and by_step[0]["undone"]["job"] == second["job_id"]
    assert by_step[0]["undone"]["by"] == "olu" and by_step[0]["undone"]["attempts"] == 1
    assert by_step[1]["next"] == "fix and retry" and "downstream said no" in by_step[1]["last_error"]
    assert [g["do"] for g in standing["next"]] == ["fix and retry"]

    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    section = page.locator("#standing")
    text = section.inner_text()
    assert "Where it stands" in text
    rows = section.locator("table.standing tbody tr")
    assert rows.count() == 2
    assert first["job_id"] in rows.nth(1).inner_text() and second["job_id"] in rows.nth(0).inner_text()
    assert "fix and retry" in text and "downstream said no" in text

"""Forms answer with a redirect (post/redirect/get), so a reload never sends one again; console errors
are HTML pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.server.conftest import wait_for

from reversi.engine import jobs
from reversi.server.console import views

from .conftest import WAIT_MS, Console, record_run, sign_in

ROLLBACK_FORM = "form[method=post][action$='/rollback']"


@contextmanager
def signed_in_client(console: Console, key: str) -> Iterator[tuple[httpx.Client, str]]:
    """An HTTP client signed in to the console with `key`, and the CSRF token its forms carry."""
    with httpx.Client(base_url=console.url) as client:
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert token is not None
        assert client.post("/login", data={"csrf": token.group(1), "key": key}).status_code == 303
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/halts").text)
        assert token is not None
        yield client, token.group(1)


def running(console: Console, run_id: str) -> str | None:
    """The id of the run's latest rollback job once it is running."""
    latest = jobs.latest_job(console.ledger.store, run_id)
    return latest.job_id if latest.state == jobs.JobState.RUNNING else None


def test_a_tab_told_a_rollback_is_in_progress_does_not_start_another_when_it_ends(console: Console, page: Any) -> None:
    run_id = record_run(console)
    console.hold_file.touch()  # the first rollback's compensations wait
    sign_in(page, console, console.admin_key, f"/runs/{run_id}")
    page.click("[data-open=confirm-rollback]")
    page.click(f"#confirm-rollback {ROLLBACK_FORM} button.danger")
    first = wait_for(lambda: running(console, run_id), "the first rollback to run")

    other = page.context.new_page()
    other.goto(f"{console.url}/runs/{run_id}")
    other.eval_on_selector(ROLLBACK_FORM, "f => f.submit()")  # as a tab opened before the first began
    expect(other.locator("#rollback .error")).to_contain_text(f"rollback already in progress for {run_id}")
    assert other.url == f"{console.url}/runs/{run_id}#rollback"  # a page, not the form's answer

    console.hold_file.unlink()
    expect(other.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    other.wait_for_load_state("load")
    other.wait_for_timeout(1500)  # a tab that re-sent the form would have started a job by now
    latest = jobs.latest_job(console.ledger.store, run_id)
    assert latest.job_id == first
    assert "rollback already in progress" not in other.locator("main").inner_text()  # shown once


def test_after_a_form_error_the_next_approval_ends_on_the_run_page(console: Console, page: Any) -> None:
    run_id = record_run(console)
    console.ledger.get_run(run_id).rollback(compensate=lambda call: {"ok": True})  # asks to approve step 1's undo
    sign_in(page, console, console.admin_key, f"/runs/{run_id}")
    form = page.locator("#step-2 form.resolve")
    form.locator("textarea[name=result]").fill("{not json")
    form.locator("input[name=note]").fill("looked")
    form.locator("button[type=submit]").click()
    expect(page.locator("#step-2 .error")).to_contain_text("the result is not JSON")
    assert page.url.startswith(f"{console.url}/runs/{run_id}#")
    assert page.locator("#step-2 textarea[name=result]").input_value() == "{not json"  # what was typed stays

    page.locator("#approvals .approval").first.locator("button:text('Approve')").click()
    expect(page.locator("#approvals .approval").first).to_contain_text("approved")
    assert page.url.startswith(f"{console.url}/runs/{run_id}")
    page.reload()
    assert "approved" in page.locator("#approvals .approval").first.inner_text()
    assert page.locator("#step-2 .error").count() == 0  # the error was the form's, shown once


def test_console_errors_are_html_pages_and_the_apis_stay_json(console: Console) -> None:
    with signed_in_client(console, console.admin_key) as (client, _):
        for path, status in (("/approvals/apr_x/approve", 405), ("/no/such/page", 404), ("/runs/run_x/steps", 404)):
            answer = client.get(path)
            assert answer.status_code == status, path
            assert answer.headers["content-type"].startswith("text/html"), path
            assert "That did not work" in answer.text and "<nav>" in answer.text, path
        api = client.get("/v1/no/such/endpoint")
        assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
        icon = client.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
        for path in ("/", "/halts", "/approvals"):
            assert client.get(path).headers["cache-control"] == "no-store", path


NO_HALT = "halt_00000000-0000-4000-8000-000000000000"  # well formed, and in no store
NO_APPROVAL = "apr_" + "0" * 32


def test_every_form_answers_with_a_redirect_and_its_page_shows_the_error_once(console: Console) -> None:
    run_id = record_run(console)
    with signed_in_client(console, console.admin_key) as (client, csrf):
        posts = [
            (f"/runs/{run_id}/steps/2/resolve", {"status": "succeeded", "note": "", "result": "{"},
             f"/runs/{run_id}", "the result is not JSON"),
            (f"/runs/{run_id}/steps/0/resolve", {"status": "failed", "note": "x"}, f"/runs/{run_id}",
             "only intended or uncertain steps can be resolved"),
            ("/halts", {"reason": "", "tool": "x.*"}, "/halts", "a halt needs a reason"),
            (f"/halts/{NO_HALT}/lift", {}, "/halts", f"no active halt {NO_HALT}"),
            (f"/approvals/{NO_APPROVAL}/approve", {"next": f"/runs/{run_id}"}, f"/runs/{run_id}",
             f"no approval {NO_APPROVAL}"),
            ("/halts/halt_nope/lift", {}, "/halts", "malformed halt id &#39;halt_nope&#39;"),
        ]
        for path, data, page, error in posts:
            answer = client.post(path, data={**data, "csrf": csrf}, headers={"Referer": console.url + page})
            assert answer.status_code == 303, path
            assert answer.headers["location"].split("#")[0] == page, path
            shown = client.get(page)
            assert error in shown.text, path
            assert error not in client.get(page).text, path  # a reload does not show it again
        refused = client.post("/login", data={"key": "rvk_nope", "csrf": csrf})
        assert refused.status_code == 303 and "unknown or revoked key" in client.get(refused.headers["location"]).text


def test_a_deep_link_keeps_its_query_through_sign_in(console: Console, page: Any) -> None:
    record_run(console)
    sign_in(page, console, console.operator_key, "/?actor=billing-agent")
    assert page.url == f"{console.url}/?actor=billing-agent"


def test_a_denied_approval_offers_only_approving_it_and_the_note_box_is_labelled(console: Console, page: Any) -> None:
    run_id = record_run(console)
    console.ledger.get_run(run_id).rollback(compensate=lambda call: {"ok": True})
    [approval] = console.ledger.approvals(status="pending")
    sign_in(page, console, console.operator_key, "/approvals")
    box = page.locator(f"#{approval.approval_id}")
    box.get_by_label("Note").fill("not tonight")
    box.locator("button:text('Deny')").click()
    box = page.locator(f"#{approval.approval_id}")
    expect(box).to_contain_text("denied by olu")
    assert box.locator("button:text('Deny')").count() == 0
    assert box.locator("button:text('Approve after all')").count() == 1


def test_a_bug_on_a_console_page_is_an_html_page(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "runs_page", broken)
    with signed_in_client(console, console.operator_key) as (client, _):
        answer = client.get("/")
    assert answer.status_code == 500 and answer.headers["content-type"].startswith("text/html")
    assert "internal error: see the server&#39;s log" in answer.text and "a bug" not in answer.text

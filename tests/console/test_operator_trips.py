"""What an operator tripped on in the console: Enter that rolled back, a form that blocked its good
answer, counts that disagreed, a denial that read as waiting, downloads that could be cached."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.server.conftest import wait_for

from reversi.engine import jobs
from reversi.errors import Halted
from reversi.server.console.views import PAGE_SIZE, linked_ids

from .conftest import WAIT_MS, Console, record_run, sign_in


def signed_in_client(console: Console, key: str) -> httpx.Client:
    """A client signed in to the console (close it when done)."""
    client = httpx.Client(base_url=console.url, timeout=WAIT_MS / 1000)
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert token is not None
    assert client.post("/login", data={"csrf": token.group(1), "key": key}).status_code == 303
    return client


def test_without_javascript_only_a_button_rolls_back_or_grants_approvals(console: Console, browser: Any) -> None:
    """Chromium's Enter on a checkbox presses the form's first button, with or without JavaScript: the
    confirmation has no checkbox, and approving is a button of its own."""
    run_id = record_run(console)
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 860})
    try:
        page = context.new_page()
        sign_in(page, console, console.operator_key, f"/runs/{run_id}/rollback")
        form = page.locator("form.rollback-confirm")
        assert form.locator("input[type=checkbox]").count() == 0
        assert form.locator("input:not([type=hidden]), textarea, select").count() == 0  # nothing Enter submits from
        form.locator("button.approve").click()
        page.wait_for_url(f"{console.url}/runs/{run_id}#rollback")
        wait_for(lambda: console.ledger.approvals(status="approved"), "the approval granted with the rollback")
    finally:
        context.close()


def test_the_resolve_form_sends_a_corrected_result_without_the_anyway_box(console: Console, page: Any) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")
    form = page.locator("#step-2 form.resolve")
    form.locator("input[name=note]").fill("found it")
    form.locator("textarea[name=result]").fill('{"amount": 900}')
    form.locator("button[type=submit]").click()
    form = page.locator("#step-2 form.resolve")
    expect(form.locator(".error")).to_contain_text("This result does not give $result.id")
    form.locator("textarea[name=result]").fill('{"id": "ch_3", "amount": 900}')  # corrected: no box to tick
    form.locator("button[type=submit]").click()
    expect(page.locator("#step-2 .badge.status-succeeded")).to_be_visible(timeout=WAIT_MS)
    assert console.ledger.get_run(run_id).steps()[2].result == {"id": "ch_3", "amount": 900}


def test_the_panel_counts_the_steps_the_dialog_said_it_would_undo(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    for n in range(5):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    run.begin("mail.send", {"to": "a@b.c"}).succeeded({})  # stays: nothing to undo it with
    run.begin("stripe.create_charge", {"amount": 9}).uncertain("timed out")  # stays until resolved
    console.hold_file.write_text("0")  # steps 4 to 1 are undone, step 0 waits
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("[data-open=confirm-rollback]")
    button = page.locator("#confirm-rollback button.danger")
    assert button.inner_text() == "Roll back 5 steps"
    button.click()
    expect(page.locator("#rollback")).to_contain_text("4 of 5 steps done", timeout=WAIT_MS)
    console.hold_file.unlink()
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)


def test_a_denied_undo_reads_as_denied_with_what_to_do_next(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("bank.transfer", {"amount": 3}).succeeded({"id": "tr_2"})
    run.rollback(compensate=lambda call: {"ok": True})  # asks for the transfer's approval
    [approval] = console.ledger.approvals(status="pending")
    console.ledger.deny(approval.approval_id, note="the customer keeps the money")
    run.begin("flaky.create", {}).succeeded({"id": "f_1"})  # its undo fails in the console's rollback
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    page.click("[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "done", timeout=WAIT_MS)
    report = page.locator("#job-report").inner_text()
    assert "approval denied" in report and "awaiting approval" not in report
    assert f"its undo was denied ({approval.approval_id}), so it stays" in report
    assert "Next: an operator may approve it after all, then roll back again." in report
    assert "Next: fix the cause, then roll back again" in report  # the flaky undo failed


def test_downloads_are_not_cached_nor_sniffed(console: Console) -> None:
    run_id = record_run(console)
    client = signed_in_client(console, console.operator_key)
    try:
        for path in (f"/runs/{run_id}/journal.jsonl", f"/runs/{run_id}/rollback.json"):
            answer = client.get(path)
            assert answer.headers["cache-control"] == "no-store", path
            assert answer.headers["x-content-type-options"] == "nosniff", path
    finally:
        client.close()


def test_search_finds_a_label_and_a_tool_prefix_and_paging_goes_back_to_the_newest(console: Console) -> None:
    agent = console.ledger.acting_as("billing-agent")
    tagged = agent.start_run(tenant="acme", labels={"incident": "INC-4471"})
    tagged.begin("bank.transfer", {"amount": 1}).succeeded({"id": "tr_1"})
    for n in range(PAGE_SIZE):
        agent.start_run(tenant="acme").begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    client = signed_in_client(console, console.operator_key)
    try:
        assert tagged.id in client.get("/", params={"q": "INC-4471"}).text
        by_tool = client.get("/", params={"q": "bank."}).text
        assert tagged.id in by_tool and "ch_0" not in by_tool and by_tool.count('href="/runs/run_') == 1
        first = client.get("/").text
        assert "Newest runs" not in first
        older = re.search(r'href="(/\?after=[^"]+)">Older runs', first)
        assert older is not None
        second = client.get(older.group(1).replace("&amp;", "&")).text
        assert tagged.id in second and '<a href="/?">← Newest runs</a>' in second
    finally:
        client.close()


def test_a_tenant_admin_is_told_it_may_not_lift_a_halt_of_every_tenant(console: Console) -> None:
    from reversi.engine.keys import create_key

    _, acme_admin = create_key(console.ledger.store, "ada", "admin", tenant="acme")
    everywhere = console.ledger.add_halt("all stop", by="dana")
    theirs = console.ledger.add_halt("globex's", tenant="globex", by="dana")
    client = signed_in_client(console, acme_admin)
    try:
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/halts").text)
        assert token is not None
        lifted = client.post(f"/halts/{everywhere.halt_id}/lift", data={"csrf": token.group(1)}, follow_redirects=True)
        assert (f"{everywhere.halt_id} stops the calls of every tenant: an admin confined to tenant acme may not "
                "lift it; an admin of every tenant can") in lifted.text
        hidden = client.post(f"/halts/{theirs.halt_id}/lift", data={"csrf": token.group(1)}, follow_redirects=True)
        assert f"no active halt {theirs.halt_id}" in hidden.text  # another tenant's halt: not even named
    finally:
        client.close()
    assert {h.halt_id for h in console.ledger.halts()} == {everywhere.halt_id, theirs.halt_id}


def test_an_agents_crafted_halt_post_is_refused_where_it_can_see_it(console: Console) -> None:
    client = signed_in_client(console, console.agent_key)
    try:
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/halts").text)
        assert token is not None
        for data in ({"reason": "mine now"}, {"reason": "mine now", "tool": "stripe.*"}):
            answer = client.post("/halts", data={"csrf": token.group(1), **data}, follow_redirects=True)
            assert 'id="flash-error"' in answer.text and "the key of billing-agent is agent" in answer.text
    finally:
        client.close()
    assert console.ledger.halts() == []


def test_a_refusal_names_the_scoped_halt_and_links_it(console: Console, page: Any) -> None:
    halt = console.ledger.add_halt("card testing", tool="stripe.*", by="dana")
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("bank.transfer", {"amount": 1}).succeeded({"id": "tr_1"})
    with pytest.raises(Halted):
        run.begin("stripe.create_charge", {"amount": 2})
    sign_in(page, console, console.admin_key, f"/runs/{run.id}")
    reason = page.locator(".reason").first
    assert reason.inner_text() == f"kill switch: card testing (halt {halt.halt_id} stops only calls with tool=stripe.*)"
    reason.locator("a").click()
    page.wait_for_url(f"{console.url}/halts#{halt.halt_id}")
    assert "card testing" in page.locator(f"tr[id='{halt.halt_id}']").inner_text()


def test_ids_in_a_refusal_are_linked_and_the_rest_is_escaped() -> None:
    approval = "apr_" + "0" * 32
    shown = str(linked_ids(f"approval required: {approval} <script>alert(1)</script> halt_x"))
    assert shown == (f'approval required: <a href="/approvals#{approval}"><code>{approval}</code></a> '
                     "&lt;script&gt;alert(1)&lt;/script&gt; halt_x")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_long_label_or_halt_reason_keeps_the_status_and_lift_columns_on_screen(
        console: Console, browser: Any, width: int) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme", labels={"ticket": "X" * 80})
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    console.ledger.add_halt("R" * 300, tool="nothing.*", by="dana")
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        sign_in(page, console, console.admin_key)
        status = page.locator("#run-rows tr td:nth-child(2) .badge").first.bounding_box()
        assert status is not None and status["x"] + status["width"] <= width, status
        page.goto(f"{console.url}/halts")
        lift = page.locator("table.halts button:text('Lift')").bounding_box()
        assert lift is not None and lift["x"] + lift["width"] <= width, lift
    finally:
        context.close()


def test_a_job_that_ends_keeps_what_the_operator_is_typing(console: Console, page: Any) -> None:
    run_id = record_run(console)
    console.hold_file.write_text("")  # every undo waits
    sign_in(page, console, console.admin_key, f"/runs/{run_id}")
    page.click("[data-open=confirm-rollback]")
    page.click("#confirm-rollback button.danger")
    expect(page.locator("#rollback")).to_have_attribute("data-job-state", "running", timeout=WAIT_MS)
    note = page.locator("#step-2 form.resolve input[name=note]")
    note.fill("checked the dashboard, half way through")
    console.hold_file.unlink()
    notice = page.locator("#job-notice")
    expect(notice).to_contain_text("The rollback is done", timeout=WAIT_MS)
    assert note.input_value() == "checked the dashboard, half way through"
    notice.locator("a").click()  # the operator reloads when ready
    expect(page.locator("#job-report")).to_contain_text("rollback INCOMPLETE", timeout=WAIT_MS)


def test_without_javascript_a_running_job_says_to_reload(console: Console, browser: Any) -> None:
    run_id = record_run(console)
    console.hold_file.write_text("")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, console, console.operator_key, f"/runs/{run_id}/rollback")
        page.click("form.rollback-confirm button.danger")
        page.wait_for_url(f"{console.url}/runs/{run_id}#rollback")
        hint = page.locator("#job-reload")
        expect(hint).to_contain_text("reload it", timeout=WAIT_MS)
        console.hold_file.unlink()
        wait_for(lambda: jobs.latest_job(console.ledger.store, run_id).state.value == "done", "the rollback")
        hint.locator("a").click()  # a link without the page's #rollback: a load, not a jump within the page
        expect(page.locator("#job-report")).to_contain_text("rollback INCOMPLETE", timeout=WAIT_MS)
        assert page.locator("#job-reload").count() == 0
    finally:
        context.close()


def test_a_300_step_run_is_paged_fifty_steps_at_a_time_and_drawn(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    for n in range(300):
        depends = [n - 1] if n % 3 else []
        run.begin("stripe.create_charge", {"amount": n}, depends_on=depends).succeeded({"id": f"ch_{n}"})
    client = signed_in_client(console, console.operator_key)
    try:
        whole = client.get(f"/runs/{run.id}")
        assert len(whole.content) < 200 * 1024
        assert client.get(f"/runs/{run.id}", params={"step": "x"}).status_code == 400
    finally:
        client.close()
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    window = page.locator("nav.step-window")
    assert "Steps 299 to 250 of 300" in window.inner_text()
    assert page.locator("ol.timeline > li").count() == 50
    assert page.locator("svg.run-graph g.node").count() == 50  # the picture of the steps shown
    assert page.locator("#step-249").count() == 0
    depends = page.locator("#step-250 p.depends a")  # step 250 depends on 249, on the next page
    depends.first.click()
    page.wait_for_url(f"{console.url}/runs/{run.id}?step=249#step-249")
    expect(page.locator("#step-249")).to_be_visible()
    assert "Steps 249 to 200 of 300" in page.locator("nav.step-window").inner_text()
    page.click("nav.step-window a:text('Older steps')")
    expect(page.locator("nav.step-window")).to_contain_text("Steps 199 to 150 of 300")
    page.click("[data-open=confirm-rollback]")
    dialog = page.locator("#confirm-rollback")
    assert dialog.locator("ul.undo-list li").count() == 31  # the newest 30, and how many more
    assert "and 270 older steps: the plan lists every one" in dialog.inner_text()
    assert dialog.locator("button.danger").first.inner_text() == "Roll back 300 steps"


def test_the_read_back_answer_is_shown_beside_what_was_expected_and_json_copies(console: Console,
                                                                                 browser: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("crm.update", {"name": "ada"}).succeeded({"id": "c_7"})
    run.rollback(compensate=lambda call: {"ok": True}, verifier=lambda tool, args: {"restored": False, "id": "c_7"},
                 retry={"attempts": 1})
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    try:
        page = context.new_page()
        sign_in(page, console, console.operator_key, f"/runs/{run.id}")
        read_back = page.locator("#step-0 details.read-back")
        assert "did not show the undo" in read_back.locator("summary").inner_text()
        answered, expected = read_back.locator("pre.json").all()
        assert json.loads(answered.inner_text()) == {"restored": False, "id": "c_7"}
        assert json.loads(expected.inner_text()) == {"restored": True}
        read_back.locator("button.copy").first.click()
        expect(read_back.locator("button.copy").first).to_have_text("Copied")
        assert json.loads(page.evaluate("navigator.clipboard.readText()")) == {"restored": False, "id": "c_7"}
    finally:
        context.close()


def test_a_read_back_answer_an_upstream_wrote_is_shown_as_text_never_as_markup(console: Console, page: Any) -> None:
    """The read tool's answer is the upstream's to write: markup in it is shown, not run."""
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("crm.update", {"name": "ada"}).succeeded({"id": "c_7"})
    hostile = {"restored": False, "note": "<img src=x onerror=\"document.title='pwned'\"><script>1</script>"}
    run.rollback(compensate=lambda call: {"ok": True}, verifier=lambda tool, args: hostile, retry={"attempts": 1})
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    answered = page.locator("#step-0 details.read-back pre.json").first
    assert json.loads(answered.inner_text()) == hostile
    assert page.locator("#step-0 details.read-back img, #step-0 details.read-back script").count() == 0
    assert page.title() != "pwned"

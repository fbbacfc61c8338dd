"""The run page at 3 a.m.: the timeline holds refused calls and every dependency, labels show, times
are honest, and nothing on the page grows past the screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reversi.errors import Refused

from .conftest import Console, record_run, sign_in

LONG = "x" * 600


def test_the_timeline_shows_refused_calls_requires_dependencies_and_labels(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme", labels={"ticket": "INC-7"})
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    console.ledger.add_halt("duplicate charges", tool="stripe.*", by="dana")
    with pytest.raises(Refused):
        run.begin("stripe.create_charge", {"amount": 2})
    console.ledger.lift_halts()
    run.begin("stripe.create_charge", {"amount": 3}, depends_on=[0]).succeeded({"id": "ch_1"})
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    assert "ticket=INC-7" in page.locator(".page-head").inner_text()
    items = page.locator("ol.timeline > li")
    assert [items.nth(i).get_attribute("id") for i in range(3)][0::2] == ["step-1", "step-0"]
    refused = items.nth(1).inner_text()
    assert "refused" in refused and "duplicate charges" in refused and "never ran" in refused
    assert "depends on step 0 (declared)" in page.locator("#step-1").inner_text()


def test_how_long_a_call_took_ends_at_its_own_outcome_not_at_its_resolution(console: Console, page: Any) -> None:
    run_id = record_run(console)
    sign_in(page, console, console.operator_key, f"/runs/{run_id}")
    before = page.locator("#step-2 .step-head").inner_text()
    page.wait_for_timeout(1100)
    console.ledger.get_run(run_id).resolve(2, "failed", note="not there", actor="olu")
    page.reload()
    head = page.locator("#step-2 .step-head").inner_text()
    assert head == before.replace("uncertain", "failed")  # the same "took": the call's, not the operator's
    assert "settled by olu" in page.locator("#step-2").inner_text()


@pytest.mark.parametrize("width", [390, 1280])
def test_long_values_stay_inside_the_page_and_json_reads_as_written(console: Console, browser: Any,
                                                                    width: int) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(actor="a" * 120, tenant="acme")
    big = {"html": "<script>alert(1)</script>", "rows": [{"n": n, "v": LONG[:40]} for n in range(200)], "id": LONG}
    run.begin("stripe.create_charge", {"customer": LONG}).succeeded(big)
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        sign_in(page, console, console.operator_key, f"/runs/{run.id}")
        for path in (f"/runs/{run.id}", "/", "/halts", "/approvals"):
            page.goto(console.url + path)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), (path, width)
        page.goto(f"{console.url}/runs/{run.id}")
        page.locator("#step-0 details summary:text('result')").click()
        result = page.locator("#step-0 pre.json").nth(1)
        assert result.bounding_box()["height"] < 400  # capped: it scrolls inside its box
        assert "<script>alert(1)</script>" in result.inner_text() and "\\u003c" not in page.content()
        cell = page.locator("table.journal tr:has(td:text-is('intended')) td.data details")
        cell.locator("summary").click()
        assert LONG in cell.locator("pre").inner_text()  # the whole value, expanded
    finally:
        context.close()


def test_an_operator_sees_the_run_as_a_picture_with_why_each_deferred_step_waits(
        console: Console, page: Any, screenshots: Path) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_0"})
    run.begin("stripe.create_charge", {"amount": 2}, depends_on=[0]).uncertain("timed out")
    run.begin("mail.send", {"to": "a@b.c"}).succeeded({})
    run.begin("stripe.create_charge", {"amount": 3}).succeeded({"id": "ch_3"})
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    counts = page.locator("#plan-counts").inner_text()
    for text in ("1 to undo", "1 unknown", "1 cannot be undone", "1 blocked", "0 need approval"):
        assert text in " ".join(counts.split()), text
    graph = page.locator("svg.run-graph")
    assert graph.locator("g.node").count() == 4
    deferred = graph.locator("#graph-step-0")
    assert "kind-defer" in (deferred.get_attribute("class") or "")
    assert "waits while these stay: step 1 (unresolved)" in (deferred.text_content() or "")
    assert graph.locator("path.edge.blocking").count() == 1
    assert "undo → stripe.refund" in (graph.locator("#graph-step-3").text_content() or "")
    page.locator("main").screenshot(path=str(screenshots / "run-picture.png"))


def test_the_plan_names_the_alternative_chosen_and_every_call_of_an_undo(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run()
    run.begin("notes.write", {"text": "a"}).succeeded({"id": "n1", "created": True})
    run.begin("notes.write", {"text": "b"}).succeeded({"id": "n1", "created": False, "old": "a"})
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    table = page.locator("body").inner_text()
    assert "notes.write, then notes.touch" in table and "overwritten" in table
    assert "notes.delete" in table and "created" in table


def test_the_run_page_shows_the_follow_ups_open_and_closed_with_secrets_masked(console: Console, page: Any) -> None:
    run = console.ledger.acting_as("billing-agent").start_run(tenant="acme")
    run.begin("mail.send", {"to": "ada@example.com", "password": "hunter2-Sup3rS3cret"}).succeeded({"id": "m1"})
    run.begin("mail.send", {"to": "bob@example.com"}).succeeded({"id": "m2"})
    run.rollback()
    run.close_follow_up(1, "called Bob instead", actor="dana")
    sign_in(page, console, console.operator_key, f"/runs/{run.id}")
    open_one = page.locator("#follow-up-0").inner_text()
    assert "Write to ada@example.com again" in open_one and "open" in open_one and "for support" in open_one
    closed = page.locator("#follow-up-1").inner_text()
    assert "closed by dana: called Bob instead" in closed
    assert "hunter2" not in page.content()

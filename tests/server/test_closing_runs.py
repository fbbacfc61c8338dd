"""`GET /v1/runs?expiring=D` (issue 30), on both stores: the runs with a standing step whose undo window
closes within D, the soonest first, each with those steps, as `reversi runs --expiring` finds them; only
the runs the key may see (an agent its own, an operator its tenant's); a bad duration, a number past
the calendar, another filter or another listing's cursor is a 400 with one line, and nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.engine.test_windows import MANIFEST
from tests.hostile.store_state import store_state
from tests.server.conftest import Site

from reversi.core.times import format_time


@pytest.fixture
def windows(manifest: Path, make_site: Callable[..., Site]) -> tuple[Site, dict[str, str]]:
    """Three runs with undo windows: agent's of acme (3 h, 20 h, 72 h), agent2's of acme (1 h), outsider's
    of tenant other (2 h); and one of acme whose window has closed already."""
    manifest.write_text(MANIFEST)
    site = make_site()
    for label, role, tenant in (("agent", "agent", "acme"), ("agent2", "agent", "acme"),
                                ("outsider", "agent", "other"), ("acme-operator", "operator", "acme"),
                                ("other-operator", "operator", "other"), ("operator", "operator", None),
                                ("viewer", "viewer", "acme")):
        site.add_key(label, role, tenant)
    now = datetime.now(UTC)
    runs: dict[str, str] = {}
    for who, tenant, hours in (("agent", "acme", (3, 20, 72)), ("agent2", "acme", (1,)),
                               ("outsider", "other", (2,)), ("agent", "acme", (-1,))):
        run = site.ledger.acting_as(who).start_run(tenant=tenant)
        for h in hours:
            until = format_time(now + timedelta(hours=h))
            run.begin("bank.transfer", {"to": "x"}).succeeded({"id": f"t{h}", "recallable_until": until})
        runs.setdefault(who, run.id)
    return site, runs


def _closing(site: Site, who: str, query: str) -> list[tuple[str, list[int]]]:
    answer = site.client(who).get(f"/v1/runs?{query}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["partial"] is False
    return [(r["run_id"], [c["step"] for c in r["closing"]]) for r in answer.json()["items"]]


def test_the_runs_list_gives_the_runs_whose_undo_windows_close_soon_soonest_first(
    windows: tuple[Site, dict[str, str]],
) -> None:
    site, runs = windows
    agent, agent2, outsider = runs["agent"], runs["agent2"], runs["outsider"]
    assert _closing(site, "operator", "expiring=24h") == [(agent2, [0]), (outsider, [0]), (agent, [0, 1])]
    assert _closing(site, "operator", "expiring=4d") == [(agent2, [0]), (outsider, [0]), (agent, [0, 1, 2])]
    assert _closing(site, "operator", "expiring=30m") == []
    assert _closing(site, "operator", "expiring=24h&tenant=other") == [(outsider, [0])]
    assert _closing(site, "acme-operator", "expiring=24h") == [(agent2, [0]), (agent, [0, 1])]
    assert _closing(site, "acme-operator", "expiring=24h&tenant=other") == []  # its own tenant, whatever it asks
    assert _closing(site, "viewer", "expiring=24h") == [(agent2, [0]), (agent, [0, 1])]
    assert _closing(site, "other-operator", "expiring=24h") == [(outsider, [0])]
    assert _closing(site, "agent", "expiring=24h") == [(agent, [0, 1])]  # an agent sees its own runs only
    assert _closing(site, "outsider", "expiring=1h") == []

    answer = site.client("acme-operator").get("/v1/runs?expiring=24h").json()
    first = answer["items"][0]
    assert (first["run_id"], first["tenant"], first["steps"], first["standing"]) == (agent2, "acme", 1, 1)
    [step] = first["closing"]
    assert step["tool"] == "bank.transfer" and step["left"].startswith(("59m", "1h")), step
    assert step["closes"] > format_time(datetime.now(UTC))

    one = site.client("operator").get("/v1/runs?expiring=4d&limit=2").json()
    assert [r["run_id"] for r in one["items"]] == [agent2, outsider] and one["next"]
    rest = site.client("operator").get(f"/v1/runs?expiring=4d&limit=2&cursor={one['next']}").json()
    assert [r["run_id"] for r in rest["items"]] == [agent] and rest["next"] is None


def test_a_span_past_the_calendar_takes_every_window(windows: tuple[Site, dict[str, str]]) -> None:
    site, runs = windows
    assert [run for run, _ in _closing(site, "operator", "expiring=999999999d")] == [
        runs["agent2"], runs["outsider"], runs["agent"]]


@pytest.mark.parametrize(("query", "said"), [
    ("expiring=soon", "expiring 'soon': expected a duration like 90d, 12h or 30m"),
    ("expiring=", "expiring '': expected a duration like 90d, 12h or 30m"),
    ("expiring=-1h", "expiring '-1h': expected a duration like 90d, 12h or 30m"),
    ("expiring=1.5h", "expiring '1.5h': expected a duration like 90d, 12h or 30m"),
    ("expiring=%C2%B2h", "expiring '²h': expected a duration like 90d, 12h or 30m"),
    ("expiring=999999999999d", "expiring '999999999999d': too long to be a duration"),
    ("expiring=" + "9" * 5000 + "h", "expiring '" + "9" * 40 + "'...: too long to be a duration"),
    ("expiring=" + "x" * 3000, "expiring '" + "x" * 40 + "'...: expected a duration like 90d, 12h or 30m"),
    ("expiring=1d&actor=x", "expiring takes no actor filter: it looks at every run with a standing step (tenant, "
                            "limit and cursor apply)"),
    ("expiring=1d&status=succeeded", "expiring takes no status filter: it looks at every run with a standing step "
                                     "(tenant, limit and cursor apply)"),
    ("expiring=1d&limit=0", "limit '0': expected a whole number from 1 to 1000"),
    ("expiring=1d&cursor=WyJ4IiwgInkiXQ", "bad cursor: pass the `next` of the previous page as it was"),
])
def test_a_bad_expiring_query_is_a_one_line_400_and_changes_nothing(
    windows: tuple[Site, dict[str, str]], query: str, said: str,
) -> None:
    site, _ = windows
    before = store_state(site.ledger)
    answer = site.client("operator").get(f"/v1/runs?{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == {"code": "bad_input", "message": said}
    assert "\n" not in said
    assert store_state(site.ledger) == before


def test_expiring_needs_a_key_as_the_runs_list_does(windows: tuple[Site, dict[str, str]]) -> None:
    site, runs = windows
    anonymous = site.client()
    answer = anonymous.get("/v1/runs?expiring=24h")
    assert answer.status_code == 401 and runs["agent"] not in answer.text

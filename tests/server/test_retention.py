"""The server applies `retention:` itself: a periodic pass in a thread of its own, one server of many at a
time (the store's `retention` lease), with what it pruned and holds back in `/metrics` and the console."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.cli.test_prune import seed_old
from tests.server.conftest import ServerProcess, Site, wait_for

import reversi
from reversi.core.models import EventType
from reversi.engine.keys import Principal, Role
from reversi.engine.retention import LEASE_NAME

WAIT_S = 30.0


def metric(url: str, name: str) -> float | None:
    """The value of one sample of the server's `/metrics`, None when it has none."""
    text = httpx.get(f"{url}/metrics", timeout=WAIT_S).text
    return next((s.value for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name == name), None)


def remaining(db_url: str, run_ids: list[str]) -> set[str]:
    with reversi.open(db_url) as ledger, ledger.store.read() as q:
        return {run_id for run_id in run_ids if q.get_run(run_id) is not None}


def test_the_server_prunes_the_runs_past_retention_and_counts_those_it_holds_back(
        make_site: Callable[..., Site], db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    going, held = seed_old(db_url, 30), seed_old(db_url, 4, EventType.UNCERTAIN)
    monkeypatch.setenv("REVERSI_RETENTION", "30d")
    site = make_site(retention_every_s=0.2)
    wait_for(lambda: metric(site.url, "reversi_retention_pruned_runs_total") == len(going), "the runs to be pruned")
    wait_for(lambda: metric(site.url, "reversi_retention_held_runs") == len(held), "the held-back count")
    assert remaining(db_url, going + held) == set(held)
    recent = site.ledger.start_run()
    recent.begin("stripe.create_charge", {"amount": 1}).failed("declined")  # settled, but inside the window
    wait_for(lambda: metric(site.url, "reversi_retention_pruned_runs_total") == len(going)
             and metric(site.url, "reversi_retention_held_runs") == len(held), "another pass")
    assert remaining(db_url, [recent.id]) == {recent.id}


def test_two_servers_never_prune_at_once_and_together_prune_each_run_once(
        spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str) -> None:
    going, held = seed_old(db_url, 300), seed_old(db_url, 3, EventType.UNCERTAIN)
    env = {"REVERSI_RETENTION": "30d", "REVERSI_RETENTION_INTERVAL_S": "0.2"}
    with reversi.open(db_url) as ledger:
        lease = ledger.store.lock_run(LEASE_NAME)  # this process applies retention meanwhile: the servers may not
        servers = [spawn_server(env), spawn_server(env)]
        # each has passed, as a dry run: it counts what is held back and prunes nothing
        wait_for(lambda: all(metric(s.url, "reversi_retention_held_runs") == len(held) for s in servers), "dry runs")
        assert remaining(db_url, going) == set(going)
        assert [metric(s.url, "reversi_retention_pruned_runs_total") for s in servers] == [0, 0]
        lease.release()
    wait_for(lambda: not remaining(db_url, going), "the servers to prune every run")
    totals = [metric(s.url, "reversi_retention_pruned_runs_total") or 0 for s in servers]
    assert sum(totals) == len(going)  # each run pruned once, by one server
    assert remaining(db_url, held) == set(held)
    said = [line for s in servers for line in s.said if "retention: pruned" in line]
    assert all("held back" in line for line in said)


def test_the_console_shows_how_many_runs_retention_keeps_and_links_to_them(
        make_site: Callable[..., Site], db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    held = seed_old(db_url, 2, EventType.UNCERTAIN, tenant="acme") + seed_old(db_url, 1, EventType.SUCCEEDED)
    monkeypatch.setenv("REVERSI_RETENTION", "30d")
    site = make_site(retention_every_s=600)
    recent = site.ledger.start_run().id
    local = site.client()  # the store holds no key: loopback acts as the admin `local`
    page = local.get("/").text
    assert '<a href="/?attention=retained"' in page and 'Kept past retention <span class="count">3</span>' in page
    listed = local.get("/", params={"attention": "retained"}).text
    assert all(f'href="/runs/{run_id}"' in listed for run_id in held) and f'href="/runs/{recent}"' not in listed
    acme = site.ledger.for_principal(Principal("acme-operator", Role.OPERATOR, "acme"))
    assert acme.retained_count() == 2  # a principal confined to a tenant counts its tenant's runs


def test_the_console_shows_no_retention_count_when_none_is_configured(make_site: Callable[..., Site]) -> None:
    page = make_site().client().get("/").text
    assert "attention=retained" not in page

"""No event loop of the server waits on the store: neither uvicorn's, which answers every request (the
API's and the console's), nor the job worker's, while rollback jobs of one run and of many run on it.
Every store transaction is looked at as it opens (`loop_watch`): the test asserts none opened on a
thread running a loop. It looks at threads, not at timings, so a loaded machine cannot make it pass
or fail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from tests.server.conftest import Site, compensator_cmd, wait_for
from tests.server.test_access import sign_in
from tests.server.test_jobs import finished, record_jobs

from reversi.store import loop_watch


def _scope_done(client: httpx.Client, job_id: str) -> dict[str, Any] | None:
    job = client.get(f"/v1/scopes/rollback/{job_id}").json()
    return job if job["state"] == "done" else None


def test_recording_and_rollback_jobs_never_open_a_store_transaction_on_an_event_loop(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    with loop_watch.watching() as on_a_loop:
        site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
        site.add_key("agent", "agent")
        site.add_key("operator", "operator")
        agent, operator = site.client("agent"), site.client("operator")
        one = record_jobs(agent, 3)  # one request at a time: the journal writes of a lone request
        started = operator.post(f"/v1/runs/{one}/rollback", json={"confirm": True})
        assert started.status_code == 202
        job = wait_for(lambda: finished(operator, one), "the rollback job to finish")
        assert job["report"]["compensated"] == [2, 1, 0]

        many = [record_jobs(agent, 2) for _ in range(2)]
        scope = operator.post("/v1/scopes/rollback", json={"key": "agent", "confirm": True})
        assert scope.status_code == 202, scope.text
        done = wait_for(lambda: _scope_done(operator, scope.json()["job_id"]), "the scope job to finish")
        assert done["error"] is None
        assert all(s.status.value == "compensated" for run_id in many for s in site.ledger.get_run(run_id).steps())

        browser = httpx.Client(base_url=site.url)  # the console's pages, signed in
        site.clients.append(browser)
        assert sign_in(browser, site.keys["operator"]).status_code in (200, 303)
        for path in ("/", f"/runs/{one}", f"/runs/{one}/job", f"/runs/{one}/rollback.json", "/approvals", "/halts",
                     f"/scopes/jobs/{scope.json()['job_id']}"):
            assert browser.get(path).status_code == 200, path
    assert not on_a_loop, "a store transaction opened on an event loop:\n" + "\n".join(on_a_loop[:3])


def test_the_watch_sees_a_transaction_opened_on_a_loop(make_site: Callable[..., Site]) -> None:
    """The instrument itself: a read on a loop is noted, one in a plain thread is not."""
    import asyncio

    site = make_site()

    async def on_loop() -> None:
        site.ledger.list_runs()

    with loop_watch.watching() as on_a_loop:
        site.ledger.list_runs()
        assert on_a_loop == []
        asyncio.run(on_loop())
    assert len(on_a_loop) == 1 and "on_loop" in on_a_loop[0]

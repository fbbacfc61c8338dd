"""Where an endpoint runs is declared, never inferred: a handler whose definition disagrees with its
declaration is refused when the route table is made, and a key revoked is refused at once whichever
way its endpoint runs, even when the cached principal answers without a journal write."""

from __future__ import annotations

import re

import pytest
from starlette.responses import Response
from tests.server.conftest import Site

from reversi.engine.keys import Role, revoke_key
from reversi.server import api
from reversi.server.endpoint import Call, Endpoint, Runs, reply


async def coroutine_handler(call: Call) -> Response:
    return reply({})


def plain_handler(call: Call) -> Response:
    return reply({})


def test_every_endpoint_of_the_route_table_declares_where_it_runs() -> None:
    for ep in api.ENDPOINTS:
        assert isinstance(ep.runs, Runs)
    assert {ep.path for ep in api.ENDPOINTS if ep.runs is Runs.LOOP} == {
        "/v1/runs/{run_id}/steps", "/v1/runs/{run_id}/steps/{step}/outcome"}


def test_an_async_handler_declared_for_a_thread_is_refused_when_registered() -> None:
    with pytest.raises(TypeError, match=r"GET /v1/x: coroutine_handler is a coroutine function \(async def\) "
                                        r"declared runs=Runs.THREAD: declare runs=Runs.LOOP"):
        Endpoint("GET", "/v1/x", coroutine_handler, Role.AGENT, "x", {200: "X"}, runs=Runs.THREAD)


def test_a_plain_handler_declared_for_the_loop_is_refused_when_registered() -> None:
    with pytest.raises(TypeError, match=re.escape("GET /v1/x: plain_handler is declared runs=Runs.LOOP but is a "
                                                  "plain function: the event loop would wait for it")):
        Endpoint("GET", "/v1/x", plain_handler, Role.AGENT, "x", {200: "X"}, runs=Runs.LOOP)


def test_an_endpoint_without_a_declaration_is_refused() -> None:
    with pytest.raises(TypeError, match="runs"):
        Endpoint("GET", "/v1/x", plain_handler, Role.AGENT, "x", {200: "X"})  # type: ignore[call-arg]


def test_declared_endpoints_run_where_they_say() -> None:
    loop = Endpoint("POST", "/v1/x", coroutine_handler, Role.AGENT, "x", {200: "X"}, runs=Runs.LOOP)
    thread = Endpoint("POST", "/v1/x", plain_handler, Role.AGENT, "x", {200: "X"}, runs=Runs.THREAD)
    assert loop.on_loop and not thread.on_loop


def test_a_revoked_key_is_refused_on_the_loop_also_where_no_journal_write_checks_it(site: Site) -> None:
    """A cached principal answers a bad body, another's run and a missing step without any write: each
    of those answers waits for the key to be read again, so the revoked key hears 401 and nothing else."""
    agent, other = site.client("agent"), site.client("outsider")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    others = other.post("/v1/runs", json={}).json()["run_id"]
    assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"}).status_code == 201
    assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": 5}).status_code == 400  # cached, still valid
    assert agent.post(f"/v1/runs/{others}/steps", json={"tool": "t"}).status_code == 403
    revoke_key(site.ledger.store, site.keys["agent"].split("_")[1])
    answers = [
        agent.post(f"/v1/runs/{run_id}/steps", json={"tool": 5}),  # a body the endpoint refuses
        agent.post(f"/v1/runs/{others}/steps", json={"tool": "t"}),  # another principal's run
        agent.post(f"/v1/runs/{run_id}/steps/7/outcome", json={"status": "succeeded", "result": {}}),  # no step 7
        agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"}),  # the journal write's check
        agent.post(f"/v1/runs/{run_id}/steps", content=b"{not json"),
    ]
    for answer in answers:
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["message"] == "unknown or revoked API key"
    assert [e.type for e in site.ledger.get_run(run_id).events()] == ["run_opened", "intended"]


def test_a_revoked_operator_key_is_refused_on_the_loop_not_told_its_role_is_short(site: Site) -> None:
    """The role check on the cached principal happens before any write: a revoked key hears 401 there too."""
    operator = site.client("acme-operator")
    run_id = site.client("agent").post("/v1/runs", json={}).json()["run_id"]
    assert operator.post(f"/v1/runs/{run_id}/steps", json={"tool": "t"}).status_code == 403  # records nothing
    revoke_key(site.ledger.store, site.keys["acme-operator"].split("_")[1])
    refused = operator.post(f"/v1/runs/{run_id}/steps", json={"tool": "t"})
    assert refused.status_code == 401 and refused.json()["error"]["message"] == "unknown or revoked API key"

"""Follow-ups over HTTP and the gateway's operator tools, on both stores: an operator of the run's tenant
lists them and closes one with a note (journaled as that principal); an operator of another tenant, an
agent and a viewer may not."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.cli.test_follow_ups import MANIFEST
from tests.server.conftest import Site


def test_an_operator_of_the_tenant_lists_and_closes_follow_ups(
    manifest: Path, make_site: Callable[..., Site]
) -> None:
    manifest.write_text(MANIFEST)
    site = make_site()
    for label, role, tenant in (("agent", "agent", "acme"), ("acme-operator", "operator", "acme"),
                                ("other-operator", "operator", "other")):
        site.add_key(label, role, tenant)
    run = site.ledger.start_run(tenant="acme")
    run.begin("email.send", {"to": "ada@example.com", "subject": "Hi", "token": "s3cret"}).succeeded({"sent": 1})
    run.begin("crm.lookup", {}).succeeded({})
    report = run.rollback()
    assert [f["step"] for f in report.follow_ups] == [0]

    listed = site.client("acme-operator").get(f"/v1/runs/{run.id}/follow-ups")
    assert listed.status_code == 200, listed.text
    [shown] = listed.json()["items"]
    assert (shown["status"], shown["owner"], shown["title"]) == (
        "open", "support", "Send a correction to ada@example.com about 'Hi'")
    for who in ("other-operator", "agent"):
        assert site.client(who).get(f"/v1/runs/{run.id}/follow-ups").status_code in (403, 404)
        refused = site.client(who).post(f"/v1/runs/{run.id}/steps/0/follow-up/close", json={"note": "mine"})
        assert refused.status_code in (403, 404)

    closed = site.client("acme-operator").post(f"/v1/runs/{run.id}/steps/0/follow-up/close",
                                                json={"note": "sent the correction"})
    assert closed.status_code == 200, closed.text
    assert (closed.json()["status"], closed.json()["closed_by"]) == ("closed", "acme-operator")
    again = site.client("acme-operator").post(f"/v1/runs/{run.id}/steps/0/follow-up/close", json={"note": "x"})
    assert again.status_code == 409 and "was closed by acme-operator" in again.json()["error"]["message"]
    none = site.client("acme-operator").post(f"/v1/runs/{run.id}/steps/1/follow-up/close", json={"note": "x"})
    assert none.status_code == 404
    empty = site.client("acme-operator").post(f"/v1/runs/{run.id}/steps/0/follow-up/close", json={"note": ""})
    assert empty.status_code == 400


def test_a_steps_call_id_is_journaled_and_a_hostile_one_refused(site: Site) -> None:
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    made = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "crm.lookup", "call_id": "toolu_01"})
    assert made.status_code == 201, made.text
    [intended] = [e for e in agent.get(f"/v1/runs/{run_id}/events").json()["items"] if e["type"] == "intended"]
    assert intended["data"]["call_id"] == "toolu_01"
    for bad in ("\x1b[31mred", "x" * 201, ""):
        refused = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "crm.lookup", "call_id": bad})
        assert refused.status_code == 400 and refused.json()["error"]["message"] == (
            "call_id must be 1-200 printable characters"), refused.text
    assert len(site.ledger.get_run(run_id).steps()) == 1  # nothing journaled for a refused one


def test_an_operator_reconciles_a_run_over_http_with_the_servers_reader(
    manifest: Path, make_site: Callable[..., Site]
) -> None:
    from tests.connectors.test_probes import MANIFEST as PROBED

    manifest.write_text(PROBED)
    nothing = f"{sys.executable} -c \"import json, sys; json.load(sys.stdin); print(json.dumps({{'data': []}}))\""
    site, bare = make_site(reader_cmd=nothing), make_site(reader_cmd=None)
    for s in (site, bare):
        s.add_key("acme-operator", "operator", "acme")
    run = site.ledger.start_run(tenant="acme")
    run.begin("stripe.create_charge", {"amount": 1, "metadata": {"order": "o-1"}}).uncertain("timed out")
    run.begin("stripe.create_charge", {"amount": 2}).uncertain("timed out")
    said = site.client("acme-operator").post(f"/v1/runs/{run.id}/reconcile")
    assert said.status_code == 200, said.text
    assert [(s["step"], s["outcome"]) for s in said.json()["steps"]] == [(1, "unresolved"), (0, "failed")]
    assert said.json()["settled"] is False
    refused = bare.client("acme-operator").post(f"/v1/runs/{run.id}/reconcile")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "no_reader"


def test_a_rollback_job_the_server_runs_hands_its_follow_ups_to_the_command(
    manifest: Path, make_site: Callable[..., Site], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cli.test_follow_ups import HOOK
    from tests.server.conftest import wait_for

    told = tmp_path / "told.jsonl"
    monkeypatch.setenv("REVERSI_FOLLOW_UP_CMD", f"{HOOK} {told}")
    manifest.write_text(MANIFEST)
    site = make_site(compensator_cmd=f"{sys.executable} -c \"import sys; sys.stdin.read(); print('{{}}')\"")
    site.add_key("acme-operator", "operator", "acme")
    run = site.ledger.start_run(tenant="acme")
    run.begin("email.send", {"to": "ada@example.com", "subject": "Hi", "token": "s3cret-token"}).succeeded({})
    started = site.client("acme-operator").post(f"/v1/runs/{run.id}/rollback", json={"confirm": True})
    assert started.status_code == 202, started.text
    wait_for(lambda: told.exists() and told.read_text().strip(), "the follow-up command to be told")
    [handed] = [json.loads(line) for line in told.read_text().splitlines()]
    assert (handed["run_id"], handed["step"], handed["owner"]) == (run.id, 0, "support")
    assert "s3cret-token" not in told.read_text()


def test_the_operator_tools_list_and_close_follow_ups_with_the_apis_roles(
    manifest: Path, make_site: Callable[..., Site]
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from tests.hostile.store_state import store_state
    from tests.server.conftest import WAIT_S, ThreadServer
    from tests.server.test_access import gateway

    from reversi.engine.run import run_coroutine

    manifest.write_text(MANIFEST)
    site = make_site()
    for label, role, tenant in (("agent", "agent", "acme"), ("acme-operator", "operator", "acme"),
                                ("other-operator", "operator", "other"), ("viewer", "viewer", "acme")):
        site.add_key(label, role, tenant)
    run = site.ledger.start_run(tenant="acme")
    run.begin("email.send", {"to": "ada@example.com", "subject": "Hi", "token": "s3cret-token"}).succeeded({})
    run.begin("crm.lookup", {}).succeeded({})
    run.rollback()
    served = ThreadServer(gateway(site))

    async def calls(who: str, *asked: tuple[str, dict[str, object]]) -> list[tuple[bool, object]]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {site.keys[who]}"}, timeout=WAIT_S) as http,
            Client(streamable_http_client(f"{served.url}/operator/mcp", http_client=http), cache=None) as mcp,
        ):
            answers: list[tuple[bool, object]] = []
            for name, args in asked:
                result = await mcp.call_tool(name, args)
                text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                answers.append((result.is_error, text if result.is_error else result.structured_content))
            return answers

    try:
        before = store_state(site.ledger)
        refused = run_coroutine(calls("other-operator", ("reversi.follow_ups", {"run_id": run.id}),
                                      ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": "mine"})))
        assert refused == [(True, f"{run.id} belongs to another principal")] * 2
        bad = run_coroutine(calls(
            "acme-operator",
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": ""}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": "   "}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 1, "note": "x"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": -1, "note": "x"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 10**30, "note": "x"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": True, "note": "x"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": "0", "note": "x"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": "x", "closed": True}),
            ("reversi.follow_ups", {"run_id": "run_nope"}),
            ("reversi.follow_ups", {"run_id": "../etc"}),
        ))
        assert all(is_error for is_error, _ in bad), bad
        said = [str(text) for _, text in bad]
        assert said[0] == said[1] == "a note is required: say what was done", said
        assert said[2] == "note is required" and said[3] == f"step 1 of {run.id} has no follow-up"
        assert said[4] == said[5] == "step must be a step number: a whole number from 0 to 999999999"
        assert said[6] == said[7] == "step has the wrong type"
        assert "closed" in said[8] and said[9] == "no run run_nope", said
        assert all("\n" not in s and len(s) < 400 for s in said), said
        assert store_state(site.ledger) == before

        listed, closed, again = run_coroutine(calls(
            "acme-operator", ("reversi.follow_ups", {"run_id": run.id}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": "sent the correction"}),
            ("reversi.close_follow_up", {"run_id": run.id, "step": 0, "note": "again"})))
        assert listed[0] is False and isinstance(listed[1], dict)
        [shown] = listed[1]["follow_ups"]
        assert (shown["step"], shown["status"], shown["owner"]) == (0, "open", "support")
        assert "s3cret-token" not in str(listed[1])
        assert closed[0] is False and isinstance(closed[1], dict)
        assert (closed[1]["status"], closed[1]["closed_by"], closed[1]["note"]) == (
            "closed", "acme-operator", "sent the correction")
        assert again[0] is True and "was closed by acme-operator" in str(again[1])
        for who in ("agent", "viewer"):  # the operator endpoint needs an operator key, as over HTTP
            answer = httpx.post(f"{served.url}/operator/mcp", headers={
                "Authorization": f"Bearer {site.keys[who]}", "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
            assert answer.status_code == 403, (who, answer.text)
    finally:
        served.stop()

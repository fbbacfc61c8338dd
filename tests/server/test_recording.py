"""Recording over HTTP goes through the same engine as the SDK: the same steps, the same refusals."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import httpx
from tests.server.conftest import Site


def open_run(client: httpx.Client, **body: object) -> str:
    answer = client.post("/v1/runs", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["run_id"])


def record(client: httpx.Client, run_id: str, tool: str, args: object, result: object = None) -> int:
    begun = client.post(f"/v1/runs/{run_id}/steps", json={"tool": tool, "args": args})
    assert begun.status_code == 201, begun.text
    step = int(begun.json()["step"])
    done = client.post(f"/v1/runs/{run_id}/steps/{step}/outcome", json={"status": "succeeded", "result": result})
    assert done.status_code == 200, done.text
    return step


def test_a_run_is_opened_recorded_read_and_planned_over_http(site: Site) -> None:
    agent = site.client("agent")
    opened = agent.post("/v1/runs", json={"mode": "observe", "scope": {"actor": "billing", "environment": "prod"},
                                          "labels": {"ticket": "T-1"}})
    assert opened.status_code == 201
    run = opened.json()
    assert run["principal"] == "agent" and run["actor"] == "billing" and run["labels"] == {"ticket": "T-1"}
    assert run["steps"] == [] and run["mode"] == "observe"
    run_id = run["run_id"]

    begun = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge", "args": {"amount": 700}})
    assert (begun.status_code, begun.json()) == (201, {"step": 0, "status": "intended"})
    done = agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded", "result": {"id": "ch_1"}})
    assert done.json() == {"step": 0, "tool": "stripe.create_charge", "args": {"amount": 700}, "depends_on": [],
                           "status": "succeeded", "result": {"id": "ch_1"}, "error": None}
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "email.send", "args": {"to": "a@b.c"}, "depends_on": [0]})
    failed = agent.post(f"/v1/runs/{run_id}/steps/1/outcome", json={"status": "uncertain", "error": "timed out"})
    assert failed.json()["status"] == "uncertain" and failed.json()["error"] == "timed out"

    shown = agent.get(f"/v1/runs/{run_id}").json()
    assert [s["status"] for s in shown["steps"]] == ["succeeded", "uncertain"]
    assert (shown["standing"], shown["unresolved"], shown["steps_count"]) == (1, 1, 2)
    plan = agent.get(f"/v1/runs/{run_id}/plan").json()
    assert [a["kind"] for a in plan["actions"]] == ["unresolved", "defer"]
    assert plan["actions"][1]["blocked_by"] == [1]
    assert plan["fully_reversible"] is False
    # the same ledger, read through the SDK
    assert [s.status.value for s in site.ledger.get_run(run_id).steps()] == ["succeeded", "uncertain"]


def test_an_outcome_twice_is_a_conflict_and_an_unknown_step_is_not_found(site: Site) -> None:
    agent = site.client("agent")
    run_id = open_run(agent)
    record(agent, run_id, "stripe.create_charge", {"amount": 1}, {"id": "ch_1"})
    again = agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "failed", "error": "no"})
    assert again.status_code == 409 and "already has an outcome" in again.json()["error"]["message"]
    missing = agent.post(f"/v1/runs/{run_id}/steps/7/outcome", json={"status": "failed"})
    assert missing.status_code == 404 and missing.json()["error"]["message"] == f"no step 7 in {run_id}"
    assert agent.get("/v1/runs/run_nosuchrun").status_code == 404


def test_reversi_run_id_continues_a_run_or_creates_it_under_that_id(site: Site) -> None:
    agent = site.client("agent")
    created = agent.post("/v1/runs", headers={"Reversi-Run-Id": "run_from-header"}, json={"mode": "enforce"})
    assert created.status_code == 201 and created.json()["run_id"] == "run_from-header"
    continued = agent.post("/v1/runs", headers={"Reversi-Run-Id": "run_from-header"}, json={"mode": "observe"})
    assert continued.status_code == 200 and continued.json()["mode"] == "enforce"
    bad = agent.post("/v1/runs", headers={"Reversi-Run-Id": "run_no/slash"}, json={})
    assert bad.status_code == 400 and "malformed run id" in bad.json()["error"]["message"]


def test_an_agent_key_with_a_tenant_forces_the_runs_tenant(site: Site) -> None:
    run = site.client("agent").post("/v1/runs", json={"scope": {"tenant": "someone-else"}}).json()
    assert run["tenant"] == "acme"


def test_a_halt_added_over_http_refuses_the_next_call_with_403(site: Site) -> None:
    agent, admin = site.client("agent"), site.client("admin")
    run_id = open_run(agent)
    halt = admin.post("/v1/halt", json={"reason": "investigating", "scope": {"tool": "stripe.*"}})
    assert halt.status_code == 201 and halt.json()["scope"] == {"tool": "stripe.*"}
    refused = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge", "args": {}})
    assert refused.status_code == 403
    said = f"kill switch: investigating (halt {halt.json()['halt_id']} stops only calls with tool=stripe.*)"
    assert refused.json() == {"error": {"code": "halted", "message": said}}
    assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "github.create_repo"}).status_code == 201
    assert admin.get("/v1/halts").json()["items"][0]["halt_id"] == halt.json()["halt_id"]
    assert admin.post("/v1/resume", json={}).json() == {"lifted": 1}
    assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"}).status_code == 201
    events = site.ledger.get_run(run_id).events()
    assert [e.data["reason"] for e in events if e.type == "refused"] == [said]


def test_the_kill_file_refuses_every_call_with_its_reason(site: Site, kill_file: Path) -> None:
    agent = site.client("agent")
    run_id = open_run(agent)
    kill_file.write_text("all hands\n")
    refused = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "github.create_repo"})
    assert (refused.status_code, refused.json()["error"]["message"]) == (403, "kill switch: all hands")
    kill_file.unlink()
    assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "github.create_repo"}).status_code == 201


def test_enforce_mode_refuses_a_tool_with_no_manifest_entry(site: Site) -> None:
    agent = site.client("agent")
    run_id = open_run(agent, mode="enforce")
    refused = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "shell.exec", "args": {"cmd": "rm"}})
    assert refused.status_code == 403
    assert refused.json()["error"] == {"code": "no_manifest_entry", "message": "no manifest entry for shell.exec"}


def test_a_duplicate_call_is_refused_with_409(site: Site) -> None:
    agent = site.client("agent")
    run_id = open_run(agent)
    record(agent, run_id, "shop.place_order", {"order_id": "o-1"}, {"ok": True})
    again = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "shop.place_order", "args": {"order_id": "o-1"}})
    assert again.status_code == 409
    assert again.json()["error"]["message"] == f"duplicate call: step 0 of {run_id} already did this"


def test_a_forward_approval_answers_202_then_lets_the_same_call_through_once_approved(site: Site) -> None:
    agent, operator = site.client("agent"), site.client("operator")
    run_id = open_run(agent)
    call = {"tool": "payments.wire", "args": {"amount": 5}}
    pending = agent.post(f"/v1/runs/{run_id}/steps", json=call)
    assert pending.status_code == 202
    approval = pending.json()["approval"]
    assert pending.json()["error"] == {"code": "approval_required",
                                       "message": f"approval required: {approval['approval_id']}"}
    assert approval["status"] == "pending" and approval["tool"] == "payments.wire"
    listed = operator.get("/v1/approvals", params={"status": "pending"}).json()["items"]
    assert [a["approval_id"] for a in listed] == [approval["approval_id"]]
    approved = operator.post(f"/v1/approvals/{approval['approval_id']}/approve", json={"note": "ok"})
    assert approved.json()["status"] == "approved" and approved.json()["decided_by"] == "operator"
    assert agent.post(f"/v1/runs/{run_id}/steps", json=call).status_code == 201

    other = {"tool": "payments.wire", "args": {"amount": 6}}
    second = agent.post(f"/v1/runs/{run_id}/steps", json=other).json()["approval"]["approval_id"]
    no_note = operator.post(f"/v1/approvals/{second}/deny", json={})
    assert no_note.status_code == 400 and "note" in no_note.json()["error"]["message"]
    operator.post(f"/v1/approvals/{second}/deny", json={"note": "too much", "by": "dana"})
    denied = agent.post(f"/v1/runs/{run_id}/steps", json=other)
    assert denied.status_code == 403 and denied.json()["error"]["message"] == "approval denied: too much"


def test_an_operator_resolves_an_uncertain_step_and_the_plan_follows(site: Site) -> None:
    agent, operator = site.client("agent"), site.client("operator")
    run_id = open_run(agent)
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge", "args": {"amount": 9}})
    agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "uncertain", "error": "timeout"})
    no_note = operator.post(f"/v1/runs/{run_id}/steps/0/resolve", json={"status": "succeeded"})
    assert no_note.status_code == 400 and "note" in no_note.json()["error"]["message"]
    settled = operator.post(f"/v1/runs/{run_id}/steps/0/resolve",
                            json={"status": "succeeded", "result": {"id": "ch_9"}, "note": "in the dashboard"})
    assert settled.status_code == 200 and settled.json()["status"] == "succeeded"
    assert settled.json()["result"] == {"id": "ch_9"}
    plan = operator.get(f"/v1/runs/{run_id}/plan").json()
    assert plan["actions"][0]["args"] == {"charge_id": "ch_9", "amount": 9}
    resolved = [e for e in site.ledger.get_run(run_id).events() if e.type == "resolved"]
    assert resolved[0].actor == "operator" and resolved[0].data["note"] == "in the dashboard"
    corrected = operator.post(f"/v1/runs/{run_id}/steps/0/resolve",  # settled by hand: it may be corrected
                              json={"status": "failed", "note": "it was the test card after all"})
    assert corrected.status_code == 200 and corrected.json()["status"] == "failed"
    record(agent, run_id, "stripe.create_charge", {"amount": 1}, {"id": "ch_1"})  # step 1: its own outcome
    again = operator.post(f"/v1/runs/{run_id}/steps/1/resolve", json={"status": "failed", "note": "x"})
    assert again.status_code == 409


def test_events_come_as_json_pages_or_as_json_lines(site: Site) -> None:
    agent = site.client("agent")
    run_id = open_run(agent)
    for n in range(3):
        record(agent, run_id, "jobs.start", {"n": n}, {"id": f"j{n}"})
    first = agent.get(f"/v1/runs/{run_id}/events", params={"limit": 4}).json()
    assert [e["seq"] for e in first["items"]] == [0, 1, 2, 3] and first["next"]
    rest = agent.get(f"/v1/runs/{run_id}/events", params={"cursor": first["next"]}).json()
    assert [e["seq"] for e in rest["items"]] == [4, 5, 6] and rest["next"] is None
    lines = agent.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/x-ndjson"})
    assert lines.headers["content-type"].startswith("application/x-ndjson")
    events = [json.loads(line) for line in lines.text.splitlines()]
    assert [e["seq"] for e in events] == list(range(7)) and events[0]["type"] == "run_opened"
    assert set(events[0]) == {"run_id", "seq", "step", "type", "at", "actor", "data"}


def test_runs_are_listed_in_pages_and_each_principal_sees_what_it_may(site: Site) -> None:
    agent, agent2, operator = site.client("agent"), site.client("agent2"), site.client("operator")
    mine = [open_run(agent) for _ in range(3)]
    theirs = open_run(agent2)
    outsider = open_run(site.client("outsider"))
    page = agent.get("/v1/runs", params={"limit": 2}).json()
    assert [r["run_id"] for r in page["items"]] == mine[::-1][:2] and page["next"]
    rest = agent.get("/v1/runs", params={"limit": 2, "cursor": page["next"]}).json()
    assert [r["run_id"] for r in rest["items"]] == [mine[0]] and rest["next"] is None
    everyone = {r["run_id"] for r in operator.get("/v1/runs").json()["items"]}
    assert everyone == {*mine, theirs, outsider}
    acme = {r["run_id"] for r in site.client("acme-operator").get("/v1/runs").json()["items"]}
    assert acme == {*mine, theirs}
    record(agent2, theirs, "stripe.create_charge", {"amount": 1}, {"id": "c"})
    assert [r["run_id"] for r in operator.get("/v1/runs", params={"status": "succeeded"}).json()["items"]] == [theirs]
    bad = operator.get("/v1/runs", params={"status": "nonsense"})
    assert bad.status_code == 400 and "nonsense" in bad.json()["error"]["message"]


def test_healthz_and_metrics_need_no_key_and_count_calls_and_refusals(site: Site) -> None:
    anonymous, agent = site.client(), site.client("agent")
    assert anonymous.get("/healthz").json() == {"status": "ok", "version": version("reversi-undo")}
    run_id = open_run(agent)
    record(agent, run_id, "shop.place_order", {"order_id": "o-9"}, {})
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "shop.place_order", "args": {"order_id": "o-9"}})
    text = anonymous.get("/metrics").text
    assert "reversi_calls_recorded_total 1.0" in text
    assert 'reversi_refusals_total{reason="duplicate"} 1.0' in text
    assert 'reversi_http_request_duration_seconds_count{method="POST",route="/v1/runs/{run_id}/steps",status="201"}' \
        in text


def test_many_agents_recording_at_once_each_get_every_step_journaled(site: Site) -> None:
    """Concurrent requests share commits on the writer thread: nothing is lost or mixed."""
    shared = open_run(site.client("agent"))

    def agent(n: int) -> tuple[str, list[int]]:
        with httpx.Client(base_url=site.url, headers={"Authorization": f"Bearer {site.keys['agent']}"}) as client:
            own = open_run(client)
            steps = [record(client, own, "stripe.create_charge", {"amount": i}, {"id": f"ch_{n}_{i}"})
                     for i in range(8)]
            for i in range(4):
                record(client, shared, "email.send", {"to": f"{n}-{i}@example.com"})
            return own, steps

    with ThreadPoolExecutor(12) as pool:
        runs = list(pool.map(agent, range(12)))
    for run_id, steps in runs:
        assert steps == list(range(8))
        recorded = site.ledger.get_run(run_id).steps()
        assert [(s.args["amount"], s.status.value) for s in recorded] == [(i, "succeeded") for i in range(8)]
    together = site.ledger.get_run(shared).steps()
    assert [s.record.step for s in together] == list(range(48))
    assert sorted(s.args["to"] for s in together) == sorted(f"{n}-{i}@example.com" for n in range(12) for i in range(4))
    assert {s.status.value for s in together} == {"succeeded"}


def test_a_clients_traceparent_header_is_journaled_with_the_step(site: Site) -> None:
    agent = site.client("agent")
    run_id = open_run(agent)
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    for traceparent in (f"00-{trace_id}-{span_id}-01", "not a traceparent"):
        answer = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.get_charge", "args": {"id": "ch_1"}},
                            headers={"traceparent": traceparent})
        assert answer.status_code == 201, answer.text
    intended = [e.data for e in site.ledger.get_run(run_id).events() if e.type == "intended"]
    assert (intended[0]["trace_id"], intended[0]["span_id"]) == (trace_id, span_id)
    assert "trace_id" not in intended[1]

"""Audit fields are facts: whoever an operator says did a decision (`actor`, `by`), the journal records
the principal that acted (the key's name; `local`, or REVERSI_PRINCIPAL, on the store) beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import Site, compensator_cmd, wait_for

import reversi

REVERSI = Path(sys.executable).with_name("reversi")
EXPORT_KEYS = {"run_id", "seq", "step", "type", "at", "actor", "data"}
OTHER = "someone-else"


def cli(db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REVERSI_")}
    return subprocess.run([str(REVERSI), "--db", db_url, *args], capture_output=True, text=True, timeout=60,
                          env=clean | env)


def exported(db_url: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """`reversi export` of one run (or all), each line checked to hold exactly the contract's keys."""
    done = cli(db_url, "export", *(["--run", run_id] if run_id else []))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(set(line) == EXPORT_KEYS for line in lines), lines
    return lines


def over_http(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    return list(client.get(f"/v1/runs/{run_id}/events", params={"limit": 1000}).json()["items"])


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def uncertain_run(site: Site) -> str:
    agent = site.client("agent")
    run_id = str(agent.post("/v1/runs", json={}).json()["run_id"])
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge", "args": {"amount": 7}})
    agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "uncertain", "error": "timed out"})
    return run_id


def test_a_resolve_journals_the_key_beside_the_actor_it_names(site: Site, db_url: str) -> None:
    run_id = uncertain_run(site)
    answer = site.client("acme-operator").post(f"/v1/runs/{run_id}/steps/0/resolve", json={
        "status": "succeeded", "result": {"id": "ch_1"}, "note": "found it", "actor": OTHER})
    assert answer.status_code == 200, answer.text
    for events in (over_http(site.client("acme-operator"), run_id), exported(db_url, run_id)):
        [resolved] = of_type(events, "resolved")
        assert resolved["actor"] == OTHER and resolved["data"]["principal"] == "acme-operator"


def test_approve_and_deny_journal_the_deciding_key_and_the_approval_names_it(site: Site, db_url: str) -> None:
    agent, operator = site.client("agent"), site.client("operator")
    run_id = str(agent.post("/v1/runs", json={}).json()["run_id"])
    asked = [agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "payments.wire", "args": {"amount": n}})
             for n in (1, 2)]
    first, second = (a.json()["approval"]["approval_id"] for a in asked)
    approved = operator.post(f"/v1/approvals/{first}/approve", json={"by": OTHER}).json()
    denied = operator.post(f"/v1/approvals/{second}/deny", json={"by": OTHER, "note": "no"}).json()
    for approval in (approved, denied, *operator.get("/v1/approvals").json()["items"]):
        assert (approval["decided_by"], approval["decided_principal"]) == (OTHER, "operator"), approval
    for events in (over_http(operator, run_id), exported(db_url, run_id)):
        for kind in ("approval_granted", "approval_denied"):
            [decided] = of_type(events, kind)
            assert decided["actor"] == OTHER and decided["data"]["principal"] == "operator"


def test_halts_journal_the_admin_key_that_added_and_lifted_them(site: Site, db_url: str) -> None:
    admin = site.client("admin")
    halt = admin.post("/v1/halt", json={"reason": "drill", "scope": {"actor": OTHER}}).json()
    assert (halt["by"], halt["scope"]) == ("admin", {"actor": OTHER}), "over HTTP, who adds a halt is the key"
    assert admin.post("/v1/resume", json={}).json() == {"lifted": 1}
    events = exported(db_url)
    assert [e["data"]["principal"] for e in events if e["type"] in ("halt_added", "halt_lifted")] == ["admin"] * 2


def test_a_rollback_job_journals_its_key_beside_the_actor_it_names(
    make_site: Callable[..., Site], tmp_path: Path, db_url: str,
) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("agent", "agent")
    site.add_key("ops", "operator")
    agent, ops = site.client("agent"), site.client("ops")
    run_id = str(agent.post("/v1/runs", json={}).json()["run_id"])
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "jobs.start", "args": {}})
    agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded", "result": {"id": "j0"}})
    started = ops.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "actor": OTHER}).json()
    assert (started["actor"], started["principal"]) == (OTHER, "ops")
    wait_for(lambda: ops.get(f"/v1/runs/{run_id}/rollback").json()["state"] == "done", "the rollback job")
    undo = [e for e in exported(db_url, run_id) if e["type"] in ("compensating", "compensated")]
    assert [(e["actor"], e["data"]["principal"]) for e in undo] == [(OTHER, "ops")] * 2


def test_on_the_store_the_principal_is_local_or_reversi_principal(db_url: str) -> None:
    with reversi.open(db_url, manifests=[]) as ledger:
        run = ledger.start_run()
        for n in range(2):
            run.begin("stripe.create_charge", {"amount": n}).uncertain("timed out")
    settled = cli(db_url, "resolve", run.id, "0", "--status", "failed", "--note", "none", "--actor", "dana")
    assert settled.returncode == 0, settled.stderr
    settled = cli(db_url, "resolve", run.id, "1", "--status", "failed", "--note", "none", "--actor", "dana",
                  REVERSI_PRINCIPAL="night-shift")
    assert settled.returncode == 0, settled.stderr
    resolved = of_type(exported(db_url, run.id), "resolved")
    assert [(e["actor"], e["data"]["principal"]) for e in resolved] == [("dana", "local"), ("dana", "night-shift")]
    added = cli(db_url, "halt", "add", "drill", "--by", "dana", "--json")
    assert json.loads(added.stdout)["by"] == "dana"
    [halt_added] = of_type(exported(db_url), "halt_added")
    assert (halt_added["actor"], halt_added["data"]["principal"]) == ("dana", "local")
    listed = cli(db_url, "halt", "list")
    assert "by dana (principal local)" in listed.stdout, listed.stdout


def test_the_console_and_the_cli_show_both_when_they_differ(make_site: Callable[..., Site], db_url: str) -> None:
    site = make_site()  # no keys: the loopback console is the admin `local`
    run = site.ledger.start_run()
    with pytest.raises(reversi.errors.ApprovalRequired) as asked:
        run.call("payments.wire", {"amount": 3}, lambda **kw: {"id": "w"})
    approval_id = str(asked.value.approval_id)
    site.ledger.acting_as("ops-bot").approve(approval_id, by=OTHER)
    page = site.client().get("/approvals")
    assert page.status_code == 200 and f"approved by {OTHER} (principal ops-bot)" in page.text, page.text
    listed = cli(db_url, "approvals", "list")
    assert f"by {OTHER} (principal ops-bot)" in listed.stdout, listed.stdout


def test_a_key_keeps_the_principals_that_created_and_revoked_it(site: Site, db_url: str) -> None:
    admin = site.client("admin")
    made = admin.post("/v1/keys", json={"name": "night-bot", "role": "agent"}).json()
    admin.delete(f"/v1/keys/{made['id']}")
    [listed] = [k for k in admin.get("/v1/keys").json()["items"] if k["id"] == made["id"]]
    assert (listed["created_by"], listed["revoked_by"]) == ("admin", "admin")
    by_cli = json.loads(cli(db_url, "keys", "create", "day-bot", "--role", "agent", "--json").stdout)["id"]
    [row] = [k for k in json.loads(cli(db_url, "keys", "list", "--json").stdout) if k["id"] == by_cli]
    assert (row["created_by"], row["revoked_by"]) == ("local", None)

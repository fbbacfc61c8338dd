"""Rollbacks of many runs over HTTP (real loopback): the plan of a key's runs, a job that undoes them all,
tenants kept apart, `contain` (an admin's) halting and revoking first, hostile bodies, and a job whose
server is killed mid-way finished by another server, each undo taking effect once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import ServerProcess, Site, compensator_cmd, wait_for
from tests.server.test_checkpoints import charges
from tests.server.test_jobs import Fifo, log_lines

import reversi


def scope_job(client: httpx.Client, job_id: str) -> dict[str, Any] | None:
    job = client.get(f"/v1/scopes/rollback/{job_id}")
    assert job.status_code == 200, job.text
    found: dict[str, Any] = job.json()
    return found if found["state"] == "done" else None


def runs_of(client: httpx.Client, count: int, steps: int) -> list[str]:
    made = []
    for _ in range(count):
        run_id = client.post("/v1/runs", json={}).json()["run_id"]
        charges(client, run_id, steps)
        made.append(run_id)
    return made


def test_a_keys_runs_are_planned_and_rolled_back_by_one_job(make_site: Callable[..., Site], tmp_path: Path) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("leaky", "agent", "acme")
    site.add_key("honest", "agent", "acme")
    site.add_key("operator", "operator", "acme")
    site.add_key("other-operator", "operator", "other")
    leaked = runs_of(site.client("leaky"), 2, 2)
    (kept,) = runs_of(site.client("honest"), 1, 1)
    operator = site.client("operator")

    plan = operator.post("/v1/scopes/plan", json={"key": "leaky"})
    assert plan.status_code == 200, plan.text
    assert plan.json()["runs"] == leaked[::-1] and len(plan.json()["actions"]) == 4
    assert operator.post("/v1/scopes/rollback", json={"key": "leaky"}).json() == plan.json()  # a dry run
    assert site.client("other-operator").post("/v1/scopes/plan", json={"key": "leaky"}).json()["runs"] == []
    refused = site.client("other-operator").post("/v1/scopes/plan", json={"key": "leaky", "tenant": "acme"})
    assert refused.status_code == 403 and "confined to tenant other" in refused.text

    started = operator.post("/v1/scopes/rollback", json={"key": "leaky", "confirm": True, "by": "oncall"})
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    job = wait_for(lambda: scope_job(operator, job_id), "the job to finish")
    assert job["report"]["complete"] and len(job["report"]["compensated"]) == 4 and job["actor"] == "oncall"
    assert site.client("other-operator").get(f"/v1/scopes/rollback/{job_id}").status_code == 404
    assert {s.status.value for r in leaked for s in site.ledger.get_run(r).steps()} == {"compensated"}
    assert site.ledger.get_run(kept).steps()[0].status.value == "succeeded"
    applied = [line["key"] for line in log_lines(tmp_path / "applied.log")]
    assert len(applied) == len(set(applied)) == 4


def test_contain_is_an_admins_and_stops_the_key_first(make_site: Callable[..., Site], tmp_path: Path) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("leaky", "agent", "acme")
    site.add_key("operator", "operator", "acme")
    site.add_key("admin", "admin", "acme")
    leaky = site.client("leaky")
    runs_of(leaky, 1, 1)
    body = {"key": "leaky", "confirm": True, "contain": True, "reason": "key leaked"}
    refused = site.client("operator").post("/v1/scopes/rollback", json=body)
    assert refused.status_code == 403 and site.ledger.list_keys()[0].revoked_at is None
    started = site.client("admin").post("/v1/scopes/rollback", json=body)
    assert started.status_code == 202, started.text
    assert started.json()["contained"][0].startswith("contained: key ")  # a key alone: revoked, nothing halted
    assert leaky.post("/v1/runs", json={}).status_code == 401  # the key is revoked before the job runs
    job = wait_for(lambda: scope_job(site.client("admin"), started.json()["job_id"]), "the job to finish")
    assert job["report"]["complete"] and job["report"]["contained"] == started.json()["contained"]
    assert site.ledger.halts() == []


@pytest.mark.parametrize(("body", "message"), [
    ({}, "needs a scope"),
    ({"labels": {"team": 1}}, "field `labels.team`"),
    ({"since": "yesterday"}, "since 'yesterday': expected a duration"),
    ({"actor": "bot\x1b[2J"}, "actor must be printable text"),
    ({"key": "k", "extra": 1}, "field `extra`"),
    ({"key": "k", "contain": True}, "give it with confirm: true"),
    ({"key": "k", "confirm": True, "reason": "x"}, "give it with contain: true"),
    ({"key": "k", "retries": 99, "confirm": True}, "field `retries`"),
    ({"key": "k", "concurrency": 0, "confirm": True, "contain": True}, "field `concurrency`"),
    ({"key": "k", "concurrency": 65, "confirm": True}, "field `concurrency`"),
    ({"key": "k", "concurrency": "8", "confirm": True}, "field `concurrency`"),
    ({"key": "x" * 500}, "key must be text of 1-200 characters"),
])
def test_hostile_scope_bodies_are_400_and_change_nothing(site: Site, body: Any, message: str) -> None:
    answer = site.client("admin").post("/v1/scopes/rollback", content=json.dumps(body))
    assert answer.status_code == 400 and message in answer.json()["error"]["message"], answer.text
    assert site.ledger.halts() == []
    with site.ledger.store.read() as q:
        assert q.unfinished_scope_jobs() == []


def test_a_scope_job_whose_server_is_killed_is_finished_by_another(
    spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str, manifest: Path, tmp_path: Path,
) -> None:
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    env = {"REVERSI_MANIFEST": str(manifest), "REVERSI_ROLLBACK_LEASE_S": "2"}
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "0", "--ready", str(ready.path),
                               "--gate", str(gate))
    first = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": blocking})
    with httpx.Client(base_url=first.url, timeout=30) as client:
        runs = runs_of(client, 3, 1)
        started = client.post("/v1/scopes/rollback", json={"key": "local", "confirm": True})
        assert started.status_code == 202, started.text
        stuck = ready.pid()  # the first run's undo (the newest run's) is under way when the server dies
    first.signal(signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(stuck, signal.SIGKILL)

    second = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": compensator_cmd(tmp_path)})
    with httpx.Client(base_url=second.url, timeout=30) as client:
        job = wait_for(lambda: scope_job(client, started.json()["job_id"]), "the other server to finish the job")
    assert job["report"]["complete"] and len(job["report"]["compensated"]) + len(
        job["report"]["already_undone"]) == 3
    with reversi.open(db_url) as ledger:
        assert {s.status.value for r in runs for s in ledger.get_run(r).steps()} == {"compensated"}
    applied = log_lines(tmp_path / "applied.log")
    assert len(applied) == 3 and len({a["key"] for a in applied}) == 3


def test_a_scope_job_undoes_each_runs_steps_several_at_once(make_site: Callable[..., Site], tmp_path: Path) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("leaky", "agent", "acme")
    site.add_key("operator", "operator", "acme")
    leaked = runs_of(site.client("leaky"), 2, 3)
    operator = site.client("operator")

    started = operator.post("/v1/scopes/rollback", json={"key": "leaky", "confirm": True, "concurrency": 3})

    assert started.status_code == 202 and started.json()["concurrency"] == 3
    job = wait_for(lambda: scope_job(operator, started.json()["job_id"]), "the job to finish")
    assert job["report"]["complete"] and job["concurrency"] == 3
    for run_id in leaked:
        assert [s.status.value for s in site.ledger.get_run(run_id).steps()] == ["compensated"] * 3
    assert len(log_lines(tmp_path / "applied.log")) == 6

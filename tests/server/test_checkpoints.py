"""Checkpoints over HTTP (real loopback): made by the run's owner, listed, and a plan or rollback job after one."""

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
from tests.server.test_jobs import Fifo, finished, log_lines

import reversi


def charges(client: httpx.Client, run_id: str, count: int) -> None:
    for _ in range(count):
        n = client.post(f"/v1/runs/{run_id}/steps", json={"tool": "jobs.start", "args": {}}).json()["step"]
        client.post(f"/v1/runs/{run_id}/steps/{n}/outcome", json={"status": "succeeded", "result": {"id": f"j{n}"}})


def test_the_owner_makes_checkpoints_and_anyone_who_may_read_the_run_lists_them(site: Site) -> None:
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    charges(agent, run_id, 2)
    made = agent.post(f"/v1/runs/{run_id}/checkpoints", json={"name": "before refactor"})
    assert made.status_code == 201
    assert made.json()["name"] == "before refactor" and made.json()["after_step"] == 1
    again = agent.post(f"/v1/runs/{run_id}/checkpoints", json={"name": "before refactor"})
    assert again.status_code == 409 and "already has a checkpoint named 'before refactor'" in again.text
    for who in ("agent", "operator", "acme-operator"):
        listed = site.client(who).get(f"/v1/runs/{run_id}/checkpoints").json()
        assert [c["name"] for c in listed["items"]] == ["before refactor"] and listed["next"] is None
    for who in ("operator", "acme-operator", "agent2", "other-operator"):
        refused = site.client(who).post(f"/v1/runs/{run_id}/checkpoints", json={"name": "mine"})
        assert refused.status_code == 403, who
        assert refused.json()["error"]["message"] == f"{run_id} belongs to another principal"
    assert [c.name for c in site.ledger.get_run(run_id).checkpoints()] == ["before refactor"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "a\x1b[2Jb"}, "printable: it holds U+001B"),
        ({"name": "x\u202eexe.txt"}, "printable: it holds U+202E"),
        ({"name": "x" * 10_000}, "1-200 characters, not 10000"),
        ({"name": ""}, "1-200 characters, not 0"),
        ({"name": 7}, "field `name`"),
        ({"name": ["a"]}, "field `name`"),
        ({}, "field `name`"),
        ({"name": "a", "extra": 1}, "field `extra`"),
    ],
)
def test_hostile_checkpoint_bodies_are_400_and_journal_nothing(site: Site, body: Any, message: str) -> None:
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    answer = agent.post(f"/v1/runs/{run_id}/checkpoints", content=json.dumps(body))
    assert answer.status_code == 400 and message in answer.json()["error"]["message"], answer.text
    assert site.ledger.get_run(run_id).checkpoints() == []


def test_a_plan_after_a_checkpoint_and_bad_scopes(site: Site) -> None:
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    charges(agent, run_id, 2)
    agent.post(f"/v1/runs/{run_id}/checkpoints", json={"name": "half"})
    charges(agent, run_id, 2)
    plan = agent.get(f"/v1/runs/{run_id}/plan", params={"to": "half"}).json()
    assert [a["step"] for a in plan["actions"]] == [3, 2]
    assert plan["scope"] == {"after_step": 1, "checkpoint": "half"}
    by_step = agent.get(f"/v1/runs/{run_id}/plan", params={"after_step": "2"}).json()
    assert [a["step"] for a in by_step["actions"]] == [3] and by_step["scope"]["checkpoint"] is None
    assert len(agent.get(f"/v1/runs/{run_id}/plan", params={"after_step": "-1"}).json()["actions"]) == 4
    assert "scope" not in agent.get(f"/v1/runs/{run_id}/plan").json()
    for params, status, message in [
        ({"to": "half", "after_step": "1"}, 400, "not both"),
        ({"to": "nope"}, 404, "no checkpoint named 'nope'"),
        ({"after_step": "9"}, 404, "no step 9 in"),
        ({"after_step": "-2"}, 400, "expected a step number"),
        ({"after_step": "x" * 5000}, 400, "expected a step number"),
        ({"to": "a\x1bb"}, 400, "printable"),
    ]:
        answer = agent.get(f"/v1/runs/{run_id}/plan", params=params)
        assert answer.status_code == status and message in answer.json()["error"]["message"], (params, answer.text)
    operator = site.client("operator")
    dry = operator.post(f"/v1/runs/{run_id}/rollback", json={"to": "half"})
    assert dry.status_code == 200 and [a["step"] for a in dry.json()["actions"]] == [3, 2]
    both = operator.post(f"/v1/runs/{run_id}/rollback", json={"to": "half", "after_step": 0, "confirm": True})
    assert both.status_code == 400 and "not both" in both.text
    bad = operator.post(f"/v1/runs/{run_id}/rollback", json={"after_step": "1"})
    assert bad.status_code == 400 and "field `after_step`" in bad.text


def test_a_rollback_job_after_a_checkpoint_then_a_whole_one_undoes_each_step_once(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    agent, operator = site.client("agent"), site.client("operator")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    charges(agent, run_id, 2)
    agent.post(f"/v1/runs/{run_id}/checkpoints", json={"name": "kept"})
    charges(agent, run_id, 3)
    started = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "to": "kept"})
    assert started.status_code == 202 and started.json()["scope"] == {"after_step": 1, "checkpoint": "kept"}
    job = wait_for(lambda: finished(operator, run_id), "the scoped job to finish")
    assert job["report"]["compensated"] == [4, 3, 2] and job["report"]["complete"] is True
    assert job["report"]["scope"] == {"after_step": 1, "checkpoint": "kept"}
    assert [s.status.value for s in site.ledger.get_run(run_id).steps()][:2] == ["succeeded", "succeeded"]
    whole = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
    assert whole.status_code == 202 and "scope" not in whole.json()
    second = wait_for(lambda: finished(operator, run_id), "the whole job to finish")
    assert second["report"]["compensated"] == [1, 0] and second["report"]["skipped"] == [4, 3, 2]
    applied = [line["key"] for line in log_lines(tmp_path / "applied.log")]
    assert len(applied) == 5 and len(set(applied)) == 5
    assert len(log_lines(tmp_path / "calls.log")) == 5  # the compensator was called once per step


def test_a_scoped_job_killed_mid_way_is_finished_by_another_server_within_its_scope(
    spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str, manifest: Path, tmp_path: Path,
) -> None:
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    env = {"REVERSI_MANIFEST": str(manifest)}
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "3", "--ready", str(ready.path),
                               "--gate", str(gate))
    first = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": blocking})
    with httpx.Client(base_url=first.url, timeout=30) as client:
        run_id = client.post("/v1/runs", json={}).json()["run_id"]
        charges(client, run_id, 2)
        assert client.post(f"/v1/runs/{run_id}/checkpoints", json={"name": "kept"}).status_code == 201
        charges(client, run_id, 3)
        assert client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "to": "kept"}).status_code == 202
        stuck = ready.pid()
        job = client.get(f"/v1/runs/{run_id}/rollback").json()
        assert (job["state"], job["current_step"], job["report"]["compensated"]) == ("running", 3, [4])
    first.signal(signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(stuck, signal.SIGKILL)

    second = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": compensator_cmd(tmp_path)})
    with httpx.Client(base_url=second.url, timeout=30) as client:
        job = wait_for(lambda: finished(client, run_id), "the other server to finish the job")
    assert job["report"]["compensated"] == [3, 2] and job["report"]["complete"] is True
    assert job["scope"] == {"after_step": 1, "checkpoint": "kept"}
    with reversi.open(db_url) as ledger:
        statuses = [s.status.value for s in ledger.get_run(run_id).steps()]
    assert statuses == ["succeeded", "succeeded", "compensated", "compensated", "compensated"]
    applied = log_lines(tmp_path / "applied.log")
    assert len(applied) == 3 and len({a["key"] for a in applied}) == 3
    assert sorted(c["step"] for c in log_lines(tmp_path / "calls.log")) == [2, 3, 3, 4]

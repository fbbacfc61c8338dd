"""Rollback jobs: dry runs, the compensator's absence, progress, and jobs that outlive their server."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import ServerProcess, Site, compensator_cmd, wait_for

import reversi
from reversi.engine.jobs import latest_job


def record_jobs(client: httpx.Client, count: int) -> str:
    run_id = str(client.post("/v1/runs", json={}).json()["run_id"])
    for n in range(count):
        client.post(f"/v1/runs/{run_id}/steps", json={"tool": f"jobs.start_{n}", "args": {"n": n}})
        client.post(f"/v1/runs/{run_id}/steps/{n}/outcome", json={"status": "succeeded", "result": {"id": f"j{n}"}})
    return run_id


def finished(client: httpx.Client, run_id: str) -> dict[str, Any] | None:
    job = client.get(f"/v1/runs/{run_id}/rollback").json()
    return job if job["state"] == "done" else None


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_without_confirm_it_is_a_dry_run_and_confirm_needs_a_compensator(make_site: Callable[..., Site]) -> None:
    site = make_site(compensator_cmd=None)
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    run_id = record_jobs(site.client("agent"), 1)
    operator = site.client("operator")
    dry = operator.post(f"/v1/runs/{run_id}/rollback", json={})
    assert dry.status_code == 200 and dry.json()["actions"][0]["compensation_tool"] == "jobs.cancel"
    refused = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "no_compensator"
    assert "REVERSI_COMPENSATOR_CMD" in refused.json()["error"]["message"]
    missing = operator.get(f"/v1/runs/{run_id}/rollback")
    assert missing.status_code == 404 and missing.json()["error"]["message"] == f"no rollback job for {run_id}"
    assert site.ledger.get_run(run_id).steps()[0].status.value == "succeeded"


def test_a_rollback_job_runs_to_the_end_and_a_second_one_skips_what_is_undone(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path), poll_s=0.2)
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    run_id = record_jobs(site.client("agent"), 2)
    operator = site.client("operator")
    started = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "actor": "dana"})
    assert started.status_code == 202 and started.json()["state"] == "queued"
    job = wait_for(lambda: finished(operator, run_id), "the job to finish")
    assert job["job_id"] == started.json()["job_id"] and job["current_step"] is None and job["error"] is None
    assert job["report"]["compensated"] == [1, 0] and job["report"]["complete"] is True
    assert [s.status.value for s in site.ledger.get_run(run_id).steps()] == ["compensated", "compensated"]
    assert {e.actor for e in site.ledger.get_run(run_id).events() if e.type == "compensated"} == {"dana"}
    again = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
    assert again.status_code == 202 and again.json()["job_id"] != job["job_id"]
    second = wait_for(lambda: finished(operator, run_id), "the second job to finish")
    assert second["report"]["skipped"] == [1, 0] and second["report"]["compensated"] == []
    assert len(log_lines(tmp_path / "applied.log")) == 2
    assert 'reversi_rollbacks_total{outcome="complete"} 2.0' in operator.get("/metrics").text


class Fifo:
    """A named pipe the blocking compensator writes its pid to when it is stuck mid-job."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.said: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: self.said.put(path.read_text()), daemon=True).start()

    def pid(self) -> int:
        try:
            return int(self.said.get(timeout=30).strip())
        except queue.Empty:
            pytest.fail("the compensator never reached the step it blocks on")


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_job_outlives_its_server_and_no_compensation_runs_twice(
    spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str, manifest: Path, tmp_path: Path,
    stop: signal.Signals,
) -> None:
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    env = {"REVERSI_MANIFEST": str(manifest)}
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "1", "--ready", str(ready.path),
                               "--gate", str(gate))
    first = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": blocking})
    with httpx.Client(base_url=first.url, timeout=30) as client:
        run_id = record_jobs(client, 3)
        assert client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True}).status_code == 202
        stuck = ready.pid()
        job = client.get(f"/v1/runs/{run_id}/rollback").json()
        assert (job["state"], job["current_step"], job["report"]["compensated"]) == ("running", 1, [2])
        assert job["report"]["complete"] is False  # so far: not a finished rollback
        busy = client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
        assert busy.status_code == 409
        assert busy.json()["error"]["message"] == f"rollback already in progress for {run_id}"

    code = first.signal(stop)
    with contextlib.suppress(ProcessLookupError):
        os.kill(stuck, signal.SIGKILL)  # the undo it was making died with it, before taking effect
    with reversi.open(db_url) as ledger:
        left = latest_job(ledger.store, run_id)
    if stop is signal.SIGTERM:
        assert code == 0 and left.state.value == "queued" and "left to resume" in first.log.read_text()
    else:
        assert left.state.value == "running"

    second = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": compensator_cmd(tmp_path)})
    with httpx.Client(base_url=second.url, timeout=30) as client:
        job = wait_for(lambda: finished(client, run_id), "the other server to finish the job")
    assert job["report"]["compensated"] == [1, 0] and job["report"]["complete"] is True
    applied = log_lines(tmp_path / "applied.log")
    assert sorted(a["key"] for a in applied) == sorted({a["key"] for a in applied}) and len(applied) == 3
    calls = [c["step"] for c in log_lines(tmp_path / "calls.log")]
    assert sorted(calls) == [0, 1, 1, 2]  # step 1 was retried with its key; step 2 was never undone twice


def test_a_job_with_concurrency_undoes_other_steps_while_one_is_stuck(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "1", "--ready", str(ready.path),
                               "--gate", str(gate))
    site = make_site(compensator_cmd=blocking, poll_s=0.2)
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    run_id = record_jobs(site.client("agent"), 3)  # independent steps
    operator = site.client("operator")

    started = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "concurrency": 3})

    assert started.status_code == 202 and started.json()["concurrency"] == 3
    ready.pid()  # step 1's undo is stuck; one at a time, step 0 would wait behind it

    def beside_the_stuck_one() -> dict[str, Any] | None:
        job: dict[str, Any] = operator.get(f"/v1/runs/{run_id}/rollback").json()
        return job if sorted((job["report"] or {}).get("compensated", [])) == [0, 2] else None

    stuck = wait_for(beside_the_stuck_one, "steps 2 and 0 to be undone beside the stuck one")
    assert (stuck["state"], stuck["current_steps"], stuck["current_step"]) == ("running", [1], 1)
    gate.write_text("go\n")
    job = wait_for(lambda: finished(operator, run_id), "the job to finish")
    assert job["report"]["compensated"] == [2, 1, 0] and job["report"]["complete"] is True
    assert job["current_steps"] == [] and job["current_step"] is None


@pytest.mark.parametrize("bad", [0, 65, "8", True, 2.5, None])
def test_a_concurrency_out_of_range_is_refused_and_queues_nothing(
    make_site: Callable[..., Site], tmp_path: Path, bad: Any
) -> None:
    site = make_site(compensator_cmd=compensator_cmd(tmp_path))
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    run_id = record_jobs(site.client("agent"), 1)
    operator = site.client("operator")

    refused = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "concurrency": bad})

    assert refused.status_code == 400 and "concurrency" in refused.json()["error"]["message"]
    assert operator.get(f"/v1/runs/{run_id}/rollback").status_code == 404


# Each undo notes how many undos run as it starts (itself included), then takes a moment, so that undos
# would overlap without the cap; the count never passes the cap however slow the machine is.
COUNTING = """
import json, os, sys, time
call = json.load(sys.stdin)
running = os.path.join(sys.argv[1], "running")
os.makedirs(running, exist_ok=True)
mine = os.path.join(running, str(os.getpid()))
open(mine, "w").close()
with open(os.path.join(sys.argv[1], "counts.log"), "a") as log:
    log.write(f"{len(os.listdir(running))}\\n")
time.sleep(0.3)
os.remove(mine)
print(json.dumps({"undone": call["tool"]}))
"""


def test_a_server_runs_at_most_its_cap_of_undos_at_once_whatever_a_job_asks(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    site = make_site(compensator_cmd=f"{sys.executable} {tmp_path / 'counting.py'} {tmp_path}", poll_s=0.2,
                     max_undos=2)
    site.add_key("agent", "agent")
    site.add_key("operator", "operator")
    run_id = record_jobs(site.client("agent"), 6)
    operator = site.client("operator")

    assert operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True, "concurrency": 8}).status_code == 202
    job = wait_for(lambda: finished(operator, run_id), "the job to finish")

    assert job["report"]["complete"] and len(job["report"]["compensated"]) == 6
    counts = [int(n) for n in (tmp_path / "counts.log").read_text().split()]
    assert len(counts) == 6 and max(counts) <= 2, counts

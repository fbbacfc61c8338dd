"""An incident drill, end to end over real processes: three agents record twenty runs through the server;
one agent's key leaks at time T. An admin asks for a contained rollback of everything that key did since
T (a job of many runs); the server running it is killed (-9) mid-way, its blocked undo with it; a second
server finishes the job. Every undo takes effect exactly once, the leaked key is revoked (no one else's
calls are halted), its runs before T and the other agents' runs are untouched."""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from tests.server.conftest import ServerProcess, compensator_cmd, wait_for
from tests.server.test_checkpoints import charges
from tests.server.test_jobs import Fifo, log_lines

import reversi
from reversi.core.models import utc_now
from reversi.engine.keys import create_key

AGENTS = ("leaky", "billing", "support")


def test_a_leaked_key_is_contained_and_everything_it_did_since_is_undone_once(
    spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str, manifest: Path, tmp_path: Path,
) -> None:
    with reversi.open(db_url) as ledger:
        keys = {name: create_key(ledger.store, name, "agent", "acme")[1] for name in AGENTS}
        admin = create_key(ledger.store, "oncall", "admin", "acme")[1]
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    env = {"REVERSI_MANIFEST": str(manifest), "REVERSI_ROLLBACK_LEASE_S": "2"}
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "1", "--ready", str(ready.path),
                               "--gate", str(gate))
    first = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": blocking})

    def client(key: str, url: str) -> httpx.Client:
        return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    agents = {name: client(key, first.url) for name, key in keys.items()}
    runs: dict[str, list[str]] = {name: [] for name in AGENTS}

    def record(count: int) -> None:  # the agents take turns, two steps a run
        for i in range(count):
            name = AGENTS[i % len(AGENTS)]
            run_id = agents[name].post("/v1/runs", json={}).json()["run_id"]
            charges(agents[name], run_id, 2)
            runs[name].append(run_id)

    record(6)  # before the leak: two runs each
    since = utc_now()
    record(14)  # after it: leaky five more, the others four and five
    before_leak, leaked = runs["leaky"][:2], runs["leaky"][2:]
    assert len(leaked) == 5 and sum(len(r) for r in runs.values()) == 20

    with client(admin, first.url) as oncall:
        body = {"key": "leaky", "since": since, "contain": True, "reason": "key leaked", "confirm": True}
        plan = oncall.post("/v1/scopes/plan", json={"key": "leaky", "since": since}).json()
        assert sorted(plan["runs"]) == sorted(leaked) and len(plan["actions"]) == 10
        started = oncall.post("/v1/scopes/rollback", json=body)
        assert started.status_code == 202, started.text
        job_id = started.json()["job_id"]
        assert [line.split(" ")[1] for line in started.json()["contained"]] == ["key"]  # no halt: only its key
    assert agents["leaky"].post("/v1/runs", json={}).status_code == 401  # revoked before the job ran
    stuck = ready.pid()  # mid-way: the first run's undo of step 1 is under way
    first.signal(signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(stuck, signal.SIGKILL)
    for c in agents.values():
        c.close()

    second = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": compensator_cmd(tmp_path)})
    with client(admin, second.url) as oncall:
        job: dict[str, Any] = wait_for(
            lambda: (found := oncall.get(f"/v1/scopes/rollback/{job_id}").json())["state"] == "done" and found,
            "the second server to finish the job")
        assert job["report"]["complete"], job
        assert oncall.get("/v1/halts").json()["items"] == []
        with client(keys["billing"], second.url) as billing:  # the other agents go on working
            fresh = billing.post("/v1/runs", json={}).json()["run_id"]
            assert billing.post(f"/v1/runs/{fresh}/steps", json={"tool": "jobs.start"}).status_code == 201

    with reversi.open(db_url) as ledger:
        status = {r: [s.status.value for s in ledger.get_run(r).steps()] for rs in runs.values() for r in rs}
    assert all(status[r] == ["compensated", "compensated"] for r in leaked)
    untouched = before_leak + runs["billing"] + runs["support"]
    assert all(status[r] == ["succeeded", "succeeded"] for r in untouched)
    applied = Counter(line["key"] for line in log_lines(tmp_path / "applied.log"))
    assert len(applied) == 10 and set(applied.values()) == {1}, "an undo took effect twice"

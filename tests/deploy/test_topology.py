"""The deployment as a whole, under agents and failures: PostgreSQL (a schema of the test's), two servers
and two HTTP gateways, all started from deploy/compose.yaml's commands as real processes.

Sixteen agents record through both gateways at once. A halt added on one server stops the next call
of every agent, on either gateway, and over the other server's API; so does the kill switch. Then
rollback jobs: the server running one is stopped (SIGSTOP) past its one-second lease, the other takes
the job over and finishes it, and the stopped one, woken, journals nothing more; the server running
another is killed (SIGKILL), and the other finishes it. The servers' compensator is the witness of
tests/engine/compensator.py, blocked at step 1 until the test opens its gate: every call it gets is
logged, and each undo takes effect once per idempotency key, however often it is called.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from tests.deploy.local import LocalHost
from tests.deploy.test_deploy import POSTGRES_ONLY, admin_key, finished_job, host, new_key
from tests.engine.test_crash import read_jsonl
from tests.gateway.test_http import connect
from tests.server.conftest import WAIT_S, compensator_cmd, wait_for

import reversi

AGENTS = 16
CALLS = 3

__all__ = ["host"]  # a fixture, used by name


class Ready:
    """The FIFOs the blocked compensators write their pid to, one per server; read without blocking."""

    def __init__(self, directory: Path, servers: tuple[int, ...]) -> None:
        self.paths = {n: directory / f"ready-{n}" for n in servers}
        self.fds: dict[int, int] = {}
        for n, path in self.paths.items():
            os.mkfifo(path)
            self.fds[n] = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def wait(self) -> tuple[int, int]:
        """(the server whose compensator is blocked now, that compensator's pid)."""
        deadline = time.monotonic() + WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            by_fd = {fd: n for n, fd in self.fds.items()}
            readable, _, _ = select.select(list(by_fd), [], [], left)
            for fd in readable:
                server, said = by_fd[fd], os.read(fd, 100).decode().split()
                os.close(fd)  # once its writer has gone it reads as ready for ever: open it anew
                self.fds[server] = os.open(self.paths[server], os.O_RDONLY | os.O_NONBLOCK)
                if said:  # else the end of an earlier writer's
                    return server, int(said[0])
        pytest.fail(f"no compensator reached its blocking point in {WAIT_S:g} s")

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


@pytest.fixture
def ready(tmp_path: Path) -> Iterator[Ready]:
    fifos = Ready(tmp_path, (1, 2))
    yield fifos
    fifos.close()


def waits_at_the_gate(pid: int) -> bool:
    """Whether process `pid` waits to open a FIFO: the blocked compensator, which opens the gate just
    after it writes its pid to `ready`, has got there."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"
    except FileNotFoundError:
        return False


def open_gate(gate: Path, *pids: int) -> None:
    """Let the compensators `pids`, blocked at the gate, go on (once each has reached it)."""
    wait_for(lambda: all(waits_at_the_gate(pid) for pid in pids), "the compensators to wait at the gate")
    os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))


async def each_agent_calls(gateways: list[str], keys: list[str], call: int) -> list[Any]:
    """Every agent makes its next call at once, half through each gateway; their results, in order."""
    results: list[Any] = [None] * len(keys)

    async def agent(i: int) -> None:
        headers = {"Authorization": f"Bearer {keys[i]}", "Reversi-Run-Id": f"run_agent_{i}"}
        async with connect(f"{gateways[i % 2]}/mcp", headers) as client:
            results[i] = await client.call_tool("fs.write_file", {"path": f"a{i}-{call}.txt", "content": f"{call}"})

    async with anyio.create_task_group() as tg:
        for i in range(len(keys)):
            tg.start_soon(agent, i)
    return results


def errors(results: list[Any]) -> list[str]:
    """The texts of the results that are errors (so a failing assertion says what went wrong)."""
    return [r.content[0].text if r.content else repr(r) for r in results if r.is_error]


def refusal(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    return text


def rollback_job(client: httpx.Client, run_id: str) -> None:
    started = client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
    assert started.status_code == 202, started.text


@POSTGRES_ONLY
def test_two_servers_and_two_gateways_share_the_agents_the_halts_and_the_jobs_of_stopped_and_dead_servers(
    host: LocalHost, tmp_path: Path, ready: Ready, db_url: str,
) -> None:
    assert host.run("init").returncode == 0
    admin = admin_key(host)
    witness, gate = tmp_path / "witness", tmp_path / "gate"
    witness.mkdir()
    os.mkfifo(gate)

    def blocking(n: int) -> str:
        return compensator_cmd(witness, "--block", "before", "--block-step", "1", "--ready", str(ready.paths[n]),
                               "--gate", str(gate))

    servers = {n: host.start(f"server-{n}", REVERSI_COMPENSATOR_CMD=blocking(n), REVERSI_READER_CMD=None,
                             REVERSI_ROLLBACK_LEASE_S="1") for n in (1, 2)}
    gateways = [host.start("gateway", label=f"gateway-{x}").url for x in "ab"]
    keys = [new_key(servers[1], admin, f"agent-{i}", "agent") for i in range(AGENTS)]
    clients = {n: httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {admin}"}, timeout=WAIT_S)
               for n, s in servers.items()}

    # Sixteen agents at once, through both gateways.
    for call in range(CALLS):
        assert not errors(anyio.run(each_agent_calls, gateways, keys, call))
    with reversi.open(db_url) as ledger:
        for i in range(AGENTS):
            assert [s.status.value for s in ledger.get_run(f"run_agent_{i}").steps()] == ["succeeded"] * CALLS

    # A halt added on one server stops the next call of every agent, and over the other server.
    added = clients[1].post("/v1/halt", json={"reason": "incident 42"})
    assert added.status_code == 201
    refused = anyio.run(each_agent_calls, gateways, keys, CALLS)
    said = f"kill switch: incident 42 (halt {added.json()['halt_id']} stops every new call)"
    assert {refusal(r) for r in refused} == {said}
    over_api = httpx.post(f"{servers[2].url}/v1/runs/run_agent_0/steps", json={"tool": "fs.stat", "args": {}},
                          headers={"Authorization": f"Bearer {keys[0]}"}, timeout=WAIT_S)
    assert over_api.status_code == 403 and over_api.json()["error"]["code"] == "halted"
    assert clients[2].post("/v1/resume", json={}).json() == {"lifted": 1}

    # The kill switch, thrown with the CLI on this machine, stops the next call of every process too.
    kill_env = {**os.environ, "REVERSI_KILL_FILE": host.environment("server-1")["REVERSI_KILL_FILE"]}
    reversi_cli = str(Path(sys.executable).parent / "reversi")
    subprocess.run([reversi_cli, "kill-switch", "on", "freeze"], env=kill_env, check=True, capture_output=True)
    assert {refusal(r) for r in anyio.run(each_agent_calls, gateways, keys[:2], CALLS)} == {"kill switch: freeze"}
    subprocess.run([reversi_cli, "kill-switch", "off"], env=kill_env, check=True, capture_output=True)
    assert not errors(anyio.run(each_agent_calls, gateways, keys[:2], CALLS))

    # The server running a job is stopped past its lease: the other takes the job over and finishes it.
    rollback_job(clients[2], "run_agent_4")
    held, stopped_undo = ready.wait()
    os.kill(servers[held].pid, signal.SIGSTOP)
    other = 3 - held
    try:
        taker, undo = ready.wait()  # the other server's compensator, at the same step, after the takeover
        assert taker == other
        open_gate(gate, stopped_undo, undo)  # both go on with the same key: the undo takes effect once
        job = wait_for(lambda: finished_job(clients[other], "run_agent_4"), "the other server to finish the job")
    finally:
        os.kill(servers[held].pid, signal.SIGCONT)
    servers[held].search(r"rollback job \S+ of run_agent_4: the rollback of run_agent_4 was taken over")
    # step 2 was undone by the stopped server before it stopped; step 1 was where it stopped
    assert (job["report"]["compensated"], job["report"]["skipped"]) == ([1, 0], [2]), job["report"]

    # The server running a job is killed: the other finishes it at once.
    rollback_job(clients[other], "run_agent_5")
    doomed, orphan = ready.wait()
    servers[doomed].signal(signal.SIGKILL)
    os.kill(orphan, signal.SIGKILL)  # the undo it was making died with it, before taking effect
    survivor = 3 - doomed
    taker, undo = ready.wait()
    assert taker == survivor
    open_gate(gate, undo)
    job = wait_for(lambda: finished_job(clients[survivor], "run_agent_5"), "the survivor to finish the job")
    assert (job["report"]["compensated"], job["report"]["skipped"]) == ([1, 0], [2]), job["report"]

    applied = Counter(a["key"] for a in read_jsonl(witness / "applied.log"))
    assert len(applied) == 2 * CALLS and set(applied.values()) == {1}, "an undo took effect twice"
    with reversi.open(db_url) as ledger:
        for run_id in ("run_agent_4", "run_agent_5"):
            events = ledger.get_run(run_id).events()
            assert Counter(e.step for e in events if e.type == "compensated") == Counter(range(CALLS)), run_id
    for client in clients.values():
        client.close()

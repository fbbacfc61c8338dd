"""A rollback job whose server is stopped (SIGSTOP) past its lease: another server takes it over and
finishes it, and the stopped one, once it wakes, journals nothing more and says so."""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.server.conftest import ServerProcess, compensator_cmd, wait_for
from tests.server.test_jobs import Fifo, finished, log_lines, record_jobs

import reversi


def test_a_job_whose_server_is_stopped_past_its_lease_is_finished_by_another_and_the_first_is_fenced(
    spawn_server: Callable[[dict[str, str]], ServerProcess], db_url: str, manifest: Path, tmp_path: Path,
) -> None:
    ready, gate = Fifo(tmp_path / "ready"), tmp_path / "gate"
    os.mkfifo(gate)
    env = {"REVERSI_MANIFEST": str(manifest), "REVERSI_ROLLBACK_LEASE_S": "1"}
    blocking = compensator_cmd(tmp_path, "--block", "before", "--block-step", "1", "--ready", str(ready.path),
                               "--gate", str(gate))
    first = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": blocking})
    second = spawn_server(env | {"REVERSI_COMPENSATOR_CMD": compensator_cmd(tmp_path)})
    with httpx.Client(base_url=first.url, timeout=30) as client:
        run_id = record_jobs(client, 3)
        assert client.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True}).status_code == 202
        ready.pid()  # the first server's worker is in step 1's compensation
    first.proc.send_signal(signal.SIGSTOP)
    try:
        with httpx.Client(base_url=second.url, timeout=30) as client:
            job = wait_for(lambda: finished(client, run_id), "the second server to take the job over")
        with open(gate, "w"):  # the first server's compensator goes on, with the same key
            pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            first.proc.send_signal(signal.SIGCONT)
    said = first.expect("reversi-server: rollback job ")
    while "running" in said:
        said = first.expect("reversi-server: rollback job ")

    assert "was taken over by another process" in said and "stopped without journaling" in said, first.said
    assert job["report"]["compensated"] == [1, 0] and job["report"]["skipped"] == [2] and job["report"]["complete"]
    with reversi.open(db_url) as ledger:
        events = ledger.get_run(run_id).events()
    assert Counter(e.step for e in events if e.type == "compensated") == Counter({0: 1, 1: 1, 2: 1})
    applied = [a["key"] for a in log_lines(tmp_path / "applied.log")]
    assert len(applied) == 3 and len(set(applied)) == 3  # each undo took effect once

"""Durability `intent`: a call waits for its `intended` only; its outcome commits soon after.

A crash before the outcome commits leaves the step `intended` (unresolved), never wrong; this
process's reads see every outcome it handed over; a run's events keep their order.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml
from tests.conftest import WAIT_S, Child

import reversi
from reversi.core.models import StepStatus
from reversi.engine.config import load_settings
from reversi.errors import ConfigError

CHILD = Path(__file__).with_name("durability_child.py")


def echo(n: int) -> dict[str, int]:
    return {"echoed": n}


def test_a_read_right_after_a_call_sees_its_outcome_in_intent_mode(db_url: str) -> None:
    with reversi.open(db_url, durability="intent") as ledger:
        run = ledger.start_run()
        for n in range(5):
            assert run.call("echo", {"n": n}, echo) == {"echoed": n}
            step = run.steps()[-1]
            assert (step.index, step.status, step.result) == (n, StepStatus.SUCCEEDED, {"echoed": n})
        assert ledger.get_run(run.id).snapshot().step(4).status is StepStatus.SUCCEEDED


def test_a_failed_call_is_journaled_failed_in_intent_mode(db_url: str) -> None:
    def boom(n: int) -> None:
        raise ValueError("no")

    with reversi.open(db_url, durability="intent") as ledger:
        run = ledger.start_run()
        with pytest.raises(ValueError):
            run.call("echo", {"n": 0}, boom)
        assert run.steps()[0].status is StepStatus.FAILED


def test_each_outcome_comes_before_the_next_intended_in_seq_order(db_url: str) -> None:
    with reversi.open(db_url, durability="intent") as ledger:
        run = ledger.start_run()
        run_id = run.id
        for n in range(20):
            run.call("echo", {"n": n}, echo)
    with reversi.open(db_url) as ledger:  # another store: what was committed, not what this process holds
        events = ledger.get_run(run_id).events()
    assert [e.seq for e in events] == list(range(len(events)))
    steps = [(e.type, e.step) for e in events if e.step is not None]
    assert steps == [(kind, n) for n in range(20) for kind in ("intended", "succeeded")]


def test_closing_the_ledger_commits_the_outcomes_still_waiting(db_url: str) -> None:
    ledger = reversi.open(db_url, durability="intent")
    run = ledger.start_run()
    run.call("echo", {"n": 0}, echo)
    ledger.close()
    with reversi.open(db_url) as other:
        assert other.get_run(run.id).steps()[0].status is StepStatus.SUCCEEDED


def test_an_outcome_is_committed_without_another_write_or_read(db_url: str) -> None:
    with reversi.open(db_url, durability="intent") as ledger, reversi.open(db_url) as other:
        run = ledger.start_run()
        run.call("echo", {"n": 0}, echo)
        seen = other.get_run(run.id)
        deadline = time.monotonic() + WAIT_S  # the background flush commits it within milliseconds
        while seen.steps()[0].status is not StepStatus.SUCCEEDED:
            assert time.monotonic() < deadline, "the deferred outcome was not committed by the background flush"


@pytest.mark.parametrize("durability", ["intent", "full"])
@pytest.mark.parametrize("killed", ["by the test", "by itself"])
def test_a_process_killed_after_its_calls_returned_leaves_no_wrong_step(
    db_url: str, tmp_path: Path, durability: str, killed: str
) -> None:
    # "by itself": SIGKILL right after a call returned, inside the window its outcome may still wait in
    argv = [sys.executable, str(CHILD), db_url, durability, *(["30"] if killed == "by itself" else [])]
    child = Child(argv, tmp_path / "child.stderr")
    try:
        run_id = child.expect("run ").split()[1]
        returned = int(child.expect("returned 30").split()[1])
        if killed == "by itself":
            assert child.line() is None
            assert child.proc.wait(WAIT_S) == -signal.SIGKILL
    finally:
        child.kill()
    with reversi.open(db_url) as ledger:
        run = ledger.get_run(run_id)
        steps, events = run.steps(), run.events()
    assert [e.seq for e in events] == list(range(len(events)))
    assert len(steps) >= returned + 1  # every call that returned had its `intended` durable
    for step in steps:
        assert step.args == {"n": step.index}
        assert step.status in (StepStatus.SUCCEEDED, StepStatus.INTENDED), step
        if step.status is StepStatus.SUCCEEDED:
            assert step.result == {"echoed": step.index}
    if durability == "full":
        assert all(s.status is StepStatus.SUCCEEDED for s in steps[: returned + 1])
    else:  # at most the outcomes of the last calls can be missing, never one before a settled step
        settled = [s.status is StepStatus.SUCCEEDED for s in steps]
        assert settled == sorted(settled, reverse=True)


@pytest.mark.parametrize("bad", ["fast", "", "FULL", "none"])
def test_a_bad_durability_is_refused_in_one_line(db_url: str, bad: str) -> None:
    with pytest.raises(ConfigError) as raised:
        reversi.open(db_url, durability=bad)
    assert str(raised.value.message) == f"durability must be full or intent, not {bad!r}"


def test_a_bad_durability_in_the_config_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "reversi.yaml"
    path.write_text(yaml.safe_dump({"durability": "sometimes"}))
    with pytest.raises(ConfigError) as raised:
        load_settings(config=str(path))
    assert raised.value.message == f"{path}: durability must be full or intent, not 'sometimes'"
    path.write_text(yaml.safe_dump({"durability": ["intent"]}))
    with pytest.raises(ConfigError, match="durability must be full or intent"):
        load_settings(config=str(path))


def test_a_bad_durability_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERSI_DURABILITY", "later")
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert raised.value.message == "REVERSI_DURABILITY must be full or intent, not 'later'"


def test_durability_comes_from_the_argument_then_the_environment_then_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REVERSI_DURABILITY", raising=False)
    monkeypatch.delenv("REVERSI_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert load_settings().durability == "full"
    path = tmp_path / "elsewhere.yaml"
    path.write_text("durability: intent\n")
    assert load_settings(config=str(path)).durability == "intent"
    monkeypatch.setenv("REVERSI_DURABILITY", "full")
    assert load_settings(config=str(path)).durability == "full"
    assert load_settings(config=str(path), durability="intent").durability == "intent"


def test_an_outcome_journaled_from_an_event_loop_is_seen_by_the_next_read(db_url: str) -> None:
    with reversi.open(db_url, durability="intent") as ledger:
        run = ledger.start_run()

        async def record() -> int:  # as the gateway does: the outcome is handed over, not awaited
            step = await ledger.abegin(run.record, "echo", {"n": 0})
            await ledger.aoutcome(run.record, step, StepStatus.SUCCEEDED, result={"echoed": 0})
            return step

        step = asyncio.run(record())
        state = run.steps()[step]
        assert (state.status, state.result) == (StepStatus.SUCCEEDED, {"echoed": 0})


FORKING = """
import atexit, os, sys, time
import reversi
url, forks = sys.argv[1], int(sys.argv[2])
with reversi.open(url, durability="intent") as ledger:
    run = ledger.start_run()
    for n in range(forks):
        run.call("echo", {"n": n}, lambda n: {"echoed": n})
        pid = os.fork()
        if pid == 0:  # a worker that ends at once: its exit hooks must neither commit nor wait for the
            atexit._run_exitfuncs()  # parent's deferred writes (it leaves the parent's connections alone:
            os._exit(0)  # a database session is its opener's, as every driver says)
        deadline = time.monotonic() + 30
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                sys.exit(f"a forked child hung at its exit after call {n}")
            time.sleep(0.01)
    print(run.id)
"""


def test_a_forked_child_never_commits_or_waits_for_its_parents_deferred_outcomes(db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "forking.py"
    script.write_text(FORKING)
    done = subprocess.run([sys.executable, str(script), db_url, "12"], capture_output=True, text=True,
                          timeout=WAIT_S * 4)
    assert done.returncode == 0, done.stderr
    with reversi.open(db_url) as ledger:
        run = ledger.get_run(done.stdout.strip())
        assert [s.status for s in run.steps()] == [StepStatus.SUCCEEDED] * 12
        events = run.events()
        assert [e.seq for e in events] == list(range(len(events)))  # nothing written twice


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # a server that drops a connection
def test_an_outcome_deferred_across_a_dropped_connection_still_lands(db_url: str) -> None:
    name = f"reversi-blip-{uuid.uuid4().hex[:8]}"
    with reversi.open(f"{db_url}&application_name={name}", durability="intent") as ledger:
        run = ledger.start_run()
        handles = [run.begin("echo", {"n": n}) for n in range(5)]
        with psycopg.connect(db_url.split("?")[0], autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          (name,))
        for n, handle in enumerate(handles):
            handle.succeeded({"echoed": n})  # handed over: the first commit meets the dropped connection
        assert [s.status for s in run.steps()] == [StepStatus.SUCCEEDED] * 5

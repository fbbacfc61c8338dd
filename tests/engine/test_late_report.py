"""Issue #26: a remote worker's late report, heard while a rollback is under way, is not undone again.

A worker claims a step and its claim runs out; a rollback starts and, while it undoes a newer step,
the worker reports its undo done. An expired claim that nobody took over is still heard (the undo
was made), so the step becomes `compensated`; the rollback read the run before that report and must
not journal `compensating` for the step again, nor call its compensation a second time.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.engine.test_crash import Downstream, wait_ready
from tests.engine.test_remote import Undo, charge, types

import reversi
from reversi.core.models import Claim, StepStatus
from reversi.core.plan import compensation_key

Spawn = Callable[..., Any]
WAIT_S = 30.0


def expire(work: reversi.CompensationWork) -> None:
    """Return once the claim has run out (its lease is a microsecond): no clock is waited on longer."""
    claim = Claim(work.worker, work.claim_until)
    while claim.is_live():
        pass


@pytest.fixture
def remote(db_url: str, manifest: Path) -> Iterator[reversi.Ledger]:
    """The remote worker's own ledger on the same store."""
    with reversi.open(db_url, manifests=[str(manifest)]) as opened:
        yield opened


def test_a_step_a_late_worker_reports_done_during_a_rollback_is_not_undone_again(
    ledger: reversi.Ledger, remote: reversi.Ledger
) -> None:
    run = ledger.start_run()
    charge(run, 7)  # 0: the worker's
    charge(run, 8)  # 1: newer, the rollback undoes it first
    downstream = Undo()  # every undo made, by the worker or by the rollback
    worker_run = remote.get_run(run.id)
    work = worker_run.begin_compensation(0, lease_s=1e-6, worker="slow")
    downstream(work.call)  # the worker's undo is made; its report comes late
    expire(work)
    heard: list[StepStatus] = []

    def compensate(call: dict[str, Any]) -> Any:
        if call["step"] == 1:  # the rollback is inside step 1's undo, past its read of the run
            heard.append(worker_run.complete_compensation(work, ok=True, result={"refund": "re_slow"}))
        return downstream(call)

    report = run.rollback(compensate=compensate)

    assert heard == [StepStatus.COMPENSATED], "the late report is heard: nobody had taken the step over"
    assert Counter(c["step"] for c in downstream.calls) == {0: 1, 1: 1}
    assert types(run, 0) == ["intended", "succeeded", "compensating", "compensated"]
    assert report.compensated == [1] and report.skipped == [0] and report.failed == [] and report.complete
    assert report.lines[-1] == "step 0  stripe.create_charge  skipped  already compensated"
    assert run.rollback(compensate=downstream).skipped == [1, 0], "a re-run reports it the same way"


def test_a_late_failure_report_during_a_rollback_leaves_the_step_to_the_rollback_with_the_same_key(
    ledger: reversi.Ledger, remote: reversi.Ledger
) -> None:
    run = ledger.start_run()
    charge(run, 7)
    charge(run, 8)
    downstream = Undo()
    worker_run = remote.get_run(run.id)
    work = worker_run.begin_compensation(0, lease_s=1e-6, worker="slow")
    expire(work)

    def compensate(call: dict[str, Any]) -> Any:
        if call["step"] == 1:
            worker_run.complete_compensation(work, ok=False, error="refund API down")
        return downstream(call)

    report = run.rollback(compensate=compensate)

    assert report.compensated == [1, 0] and report.complete
    assert [c["idempotency_key"] for c in downstream.calls if c["step"] == 0] == [work.call["idempotency_key"]]
    assert types(run, 0) == [
        "intended", "succeeded", "compensating", "compensation_failed", "compensating", "compensated",
    ]


@pytest.fixture
def fifos(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """A `ready` FIFO, already open for reading (without blocking), and a `gate` FIFO."""
    ready, gate = tmp_path / "ready.fifo", tmp_path / "gate.fifo"
    os.mkfifo(ready)
    os.mkfifo(gate)
    fd = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    yield ready, gate, fd
    os.close(fd)


def test_a_late_report_from_another_process_during_a_rollback_in_a_third_is_not_undone_again(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn, tmp_path: Path, fifos: tuple[Path, Path, int]
) -> None:
    ready, gate, ready_fd = fifos
    run = ledger.start_run()
    charge(run, 7)
    charge(run, 8)
    keys = {s: compensation_key(run.id, s, "stripe.refund") for s in (0, 1)}
    downstream = Downstream(tmp_path / "downstream")
    work = run.begin_compensation(0, lease_s=1e-6, worker="slow")
    worker_undo = subprocess.run(  # the worker's undo, made through the same downstream
        shlex.split(downstream.command("worker")), input=json.dumps(work.call), capture_output=True, text=True,
        timeout=WAIT_S, check=True,
    )
    expire(work)
    blocking = downstream.command(
        "rollback", "--block", "before", "--block-step", "1", "--ready", str(ready), "--gate", str(gate)
    )
    child = spawn("rollback", manifest=str(manifest), run_id=run.id, compensator=blocking)
    compensator = wait_ready(ready_fd)  # the rollback, in its own process, is inside step 1's undo
    try:
        late = run.complete_compensation(work, ok=True, result=json.loads(worker_undo.stdout))
    except BaseException:
        os.kill(compensator, signal.SIGKILL)  # still blocked at the gate
        raise
    with open(gate, "w"):
        pass  # let the compensator go on
    done = child.expect("done ")

    assert late is StepStatus.COMPENSATED
    report = json.loads(done.removeprefix("done "))
    assert (report["compensated"], report["skipped"], report["complete"]) == ([1], [0], True)
    assert [(c["phase"], c["step"]) for c in downstream.calls()] == [("worker", 0), ("rollback", 1)]
    assert downstream.applied() == Counter(keys.values())
    assert types(run, 0) == ["intended", "succeeded", "compensating", "compensated"]

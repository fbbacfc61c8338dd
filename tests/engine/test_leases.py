"""Rollback leases and fencing tokens: a holder stopped (SIGSTOP) past its lease is taken over, and
when it wakes its journal writes are refused; one within its lease keeps the run, however slow.

The holder is `child.py rollback` with a one-second lease, its compensator (`compensator.py`, which
applies each undo at most once per idempotency key and logs every real application) blocked on a
FIFO at step 1, so the test stops the holder at a known point: between the `compensating` it
journaled and the `compensated` it would journal.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.engine.test_crash import Downstream, fifos, wait_ready
from tests.server.conftest import wait_for

import reversi
from reversi.core.plan import compensation_key
from reversi.engine.commands import command_compensator
from reversi.errors import Fenced, RollbackInProgress

Spawn = Callable[..., Any]

__all__ = ["fifos"]  # a fixture, used by name


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process this test starts (and the test's own ledgers) hold rollbacks for one second."""
    monkeypatch.setenv("REVERSI_ROLLBACK_LEASE_S", "1")


def record_charges(run: reversi.Run, count: int) -> dict[int, str]:
    for n in range(count):
        run.begin("stripe.create_charge", {"amount": 100 + n}).succeeded({"id": f"ch_{n}"})
    return {n: compensation_key(run.id, n, "stripe.refund") for n in range(count)}


def blocked_holder(spawn: Spawn, manifest: Path, run: reversi.Run, downstream: Downstream,
                   fifos: tuple[Path, Path, int]) -> Any:
    """`child.py rollback` of `run`, once its compensator is blocked in step 1 (until the gate FIFO opens)."""
    ready, gate, ready_fd = fifos
    blocking = downstream.command("held", "--block", "before", "--block-step", "1", "--ready", str(ready),
                                  "--gate", str(gate))
    holder = spawn("rollback", manifest=str(manifest), run_id=run.id, compensator=blocking)
    wait_ready(ready_fd)
    return holder


@pytest.fixture
def stopped() -> Iterator[list[int]]:
    """Pids the test stopped: each gets SIGCONT at the end, so that the fixtures can end it."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_a_holder_stopped_past_its_lease_is_taken_over_and_its_late_writes_are_refused(
    short_lease: None, db_url: str, manifest: Path, spawn: Spawn, tmp_path: Path,
    fifos: tuple[Path, Path, int], stopped: list[int],
) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        keys = record_charges(run, 3)
        downstream = Downstream(tmp_path / "downstream")
        holder = blocked_holder(spawn, manifest, run, downstream, fifos)
        os.kill(holder.pid, signal.SIGSTOP)
        stopped.append(holder.pid)
        wait_for(lambda: not ledger.store.rollback_held(run.id), "the stopped holder's lease to run out")
        report = run.rollback(compensate=command_compensator(downstream.command("taker")), actor="taker")
        with open(fifos[1], "w"):  # the stopped holder's compensator goes on: the same key, applied once
            pass
        os.kill(holder.pid, signal.SIGCONT)
        said = holder.expect("error ")

        assert said.startswith("error fenced the rollback of " + run.id), said
        assert report.compensated == [1, 0] and report.skipped == [2] and report.complete
        events = run.events()
        taken = next(e.seq for e in events if e.actor == "taker")
        assert [e.type for e in events if e.seq > taken and e.actor != "taker"] == []  # nothing late landed
        compensated = Counter(e.step for e in events if e.type == "compensated")
        assert compensated == Counter({0: 1, 1: 1, 2: 1})
        assert downstream.applied() == Counter(keys.values())  # every undo took effect exactly once


def test_a_slow_holder_within_its_lease_keeps_the_run_as_it_renews_it(
    monkeypatch: pytest.MonkeyPatch, ledger: reversi.Ledger, manifest: Path, spawn: Spawn, tmp_path: Path,
    fifos: tuple[Path, Path, int],
) -> None:
    monkeypatch.setenv("REVERSI_ROLLBACK_LEASE_S", "2")  # renewed every 0.7 s: a loaded machine keeps up
    run = ledger.start_run()
    keys = record_charges(run, 2)
    downstream = Downstream(tmp_path / "downstream")
    holder = blocked_holder(spawn, manifest, run, downstream, fifos)
    with ledger.store.read() as q:
        lease = q.lease(run.id)
    assert lease is not None and lease.until is not None
    first_until = lease.until

    def renewed_past_first_expiry() -> bool:
        with ledger.store.read() as q:
            lease = q.lease(run.id)
        return lease is not None and lease.until is not None and lease.now > first_until and not lease.expired

    wait_for(renewed_past_first_expiry, "the holder to renew its lease past the first one's end")
    with pytest.raises(RollbackInProgress):
        run.rollback(compensate=command_compensator(downstream.command("early")))
    with open(fifos[1], "w"):
        pass
    said = holder.expect("done ")

    assert '"complete": true' in said
    assert downstream.calls("early") == [] and downstream.applied() == Counter(keys.values())


def test_a_taken_over_lease_refuses_every_write_of_its_old_holder_and_a_release_frees_the_run(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        store = ledger.store
        first = store.lock_run(run.id, lease_s=30)
        assert store.try_lock_run(run.id) is None and store.rollback_held(run.id)
        with store.write() as q:  # what a claimant does to a holder past its lease: the next token
            q.lock_run(run.id)
            assert q.take_lease(run.id, first.token, first.token + 1, "elsewhere:1", 30)

        def journal_as_first() -> None:
            with store.write() as q:
                q.lock_run(run.id)
                first.check(q)

        with pytest.raises(Fenced) as refused:
            journal_as_first()
        assert refused.value.current == first.token + 1
        assert not first.renew()
        with pytest.raises(Fenced):
            first.ensure()
        first.release()  # its process lock goes; the lease row is no longer its own to release
        with store.write() as q:
            q.release_lease(run.id, first.token + 1)
        second = store.lock_run(run.id)
        assert second.token == first.token + 2
        second.release()
        third = store.lock_run(run.id)
        assert third.token == first.token + 3
        third.release()

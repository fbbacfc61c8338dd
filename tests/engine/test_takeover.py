"""A rollback holder stopped between journaling `compensating` and calling the compensation, and taken
over meanwhile, calls nothing when it wakes: it finds its lease gone (`Lease.ensure`) and stops, Fenced.

The stale holder runs in a thread of this process on a store connection of its own, as another
process would. Right after its `compensating` commits, it stops: its event loop blocks, and its lease
renewer stops too (a stopped process renews nothing). The test waits until the lease is takeable,
rolls the run back as another holder, and only then lets the stale one go on.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import WAIT_S, wait_for

import reversi
from reversi.core.models import EventType
from reversi.engine.rollback import RollbackExecutor, RollbackOptions
from reversi.errors import Fenced
from reversi.store.base import Store
from reversi.store.leases import Lease

STALE_LEASE_S = 1.0  # how long the taker waits for the stopped holder's lease to run out



MANIFEST = """\
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id"}
      kind: compensation
  shop.place_order:
    compensation:
      tool: shop.cancel_order
      args: {order: "$result.id"}
      then:
        - tool: shop.refund_order
          args: {order: "$result.id"}
      kind: compensation
"""


class StoppedHolder:
    """A rollback of `run_id` on a store of its own, which stops right after it journals its
    `stop_at`-th `compensating` (counting from 1), or with `in_call`, inside its `stop_at`-th call of
    the compensation, until `resume` is set."""

    def __init__(self, store: Store, manifests: Any, run_id: str, stop_at: int, *, in_call: bool = False) -> None:
        self.store, self.run_id, self.stop_at, self.in_call = store, run_id, stop_at, in_call
        self.calls: list[dict[str, Any]] = []
        self.stopped, self.resume = threading.Event(), threading.Event()
        self.outcome: object = None
        self.lease: Lease = store.lock_run(run_id, lease_s=STALE_LEASE_S)
        self.executor = RollbackExecutor(
            store, manifests, RollbackOptions(compensate=self._compensate, actor="stale"), lease=self.lease)
        self._thread = threading.Thread(target=self._run, name="stale-holder")

    def _compensate(self, call: dict[str, Any]) -> dict[str, bool]:
        self.calls.append(call)
        if self.in_call and len(self.calls) == self.stop_at:
            self._stop()
        return {"ok": True}

    def _stop(self) -> None:
        self.lease._stop.set()  # its renewer stops with it, as in a process stopped by SIGSTOP
        self.stopped.set()
        self.resume.wait(WAIT_S)  # the whole loop blocks: nothing of the holder runs meanwhile

    def _compensating_journaled(self) -> int:
        with self.store.read() as q:
            return sum(e.type == EventType.COMPENSATING for e in q.run_events(self.run_id) if e.actor == "stale")

    @contextmanager
    def stopping(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """Every journal write of the executor goes through `arun_write`: stop after the one that counts."""
        write = self.store.arun_write

        async def write_then_stop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            result = await write(fn, *args, **kwargs)
            if not (self.in_call or self.stopped.is_set()) and self._compensating_journaled() == self.stop_at:
                self._stop()
            return result

        monkeypatch.setattr(self.store, "arun_write", write_then_stop)
        self._thread.start()
        try:
            yield
        finally:
            self.resume.set()
            self._thread.join(WAIT_S)
            self.lease.release()

    def _run(self) -> None:
        try:
            self.outcome = asyncio.run(self.executor.execute(self.run_id))
        except Exception as exc:
            self.outcome = exc

    def wake(self) -> object:
        self.resume.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()
        return self.outcome


def lease_ran_out(store: Store, run_id: str) -> bool:
    """By the store's clock, which claimants judge by (a holder alive or not is taken over then)."""
    with store.read() as q:
        row = q.lease(run_id)
    return row is not None and row.expired


@pytest.fixture
def ledger(db_url: str, tmp_path: Path) -> Iterator[reversi.Ledger]:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as opened:
        yield opened


@pytest.fixture
def own_store(db_url: str) -> Iterator[Store]:
    """The stale holder's connection to the same store, as another process has."""
    with reversi.open(db_url) as other:
        yield other.store


@pytest.mark.parametrize(
    ("tool", "stop_at", "stale_parts"),
    [
        ("stripe.create_charge", 1, []),  # after the attempt's `compensating`, before its only call
        ("shop.place_order", 2, [0]),  # after the first call, at the `compensating` of the second
    ],
)
def test_a_holder_taken_over_after_journaling_compensating_calls_nothing_when_it_wakes(
    ledger: reversi.Ledger, own_store: Store, monkeypatch: pytest.MonkeyPatch,
    tool: str, stop_at: int, stale_parts: list[int],
) -> None:
    run = ledger.start_run()
    for n in range(2):
        run.begin(tool, {"n": n}).succeeded({"id": f"obj_{n}"})
    stale = StoppedHolder(own_store, ledger.manifests, run.id, stop_at)
    with stale.stopping(monkeypatch):
        assert stale.stopped.wait(WAIT_S), f"the stale holder never journaled {stop_at} compensating"
        wait_for(lambda: lease_ran_out(ledger.store, run.id), "the stopped holder's lease to run out")
        report = run.rollback(compensate=lambda call: {"ok": True}, actor="taker")
        woke = stale.wake()

    assert isinstance(woke, Fenced), woke
    assert woke.token == stale.lease.token
    # the stale holder made only the calls it made before it stopped, all on step 1 (the newest)
    assert [(c["step"], c.get("part", 0)) for c in stale.calls] == [(1, p) for p in stale_parts]
    assert report.compensated == [1, 0] and report.complete
    events = run.events()
    taken = next(e.seq for e in events if e.actor == "taker")
    assert [e.type for e in events if e.seq > taken and e.actor == "stale"] == []  # nothing late landed
    assert Counter(e.step for e in events if e.type == "compensated") == Counter({0: 1, 1: 1})


def test_a_holder_taken_over_while_its_compensation_runs_journals_nothing_after_it(
    ledger: reversi.Ledger, own_store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Too late for `ensure`: the call is out. What fences it now is the check in every journal write,
    so its `compensated` is refused and the taker's account stands alone."""
    run = ledger.start_run()
    for n in range(2):
        run.begin("stripe.create_charge", {"n": n}).succeeded({"id": f"obj_{n}"})
    stale = StoppedHolder(own_store, ledger.manifests, run.id, 1, in_call=True)
    with stale.stopping(monkeypatch):
        assert stale.stopped.wait(WAIT_S), "the stale holder never called the compensation"
        wait_for(lambda: lease_ran_out(ledger.store, run.id), "the stopped holder's lease to run out")
        report = run.rollback(compensate=lambda call: {"ok": True}, actor="taker")
        woke = stale.wake()

    assert isinstance(woke, Fenced), woke
    assert [c["step"] for c in stale.calls] == [1]
    assert report.compensated == [1, 0] and report.complete
    events = run.events()
    taken = next(e.seq for e in events if e.actor == "taker")
    assert [e.type for e in events if e.actor == "stale"] == ["compensating"]
    assert all(e.seq < taken for e in events if e.actor == "stale")
    assert Counter(e.step for e in events if e.type == "compensated") == Counter({0: 1, 1: 1})

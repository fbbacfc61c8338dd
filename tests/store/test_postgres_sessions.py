"""The PostgreSQL store's sessions: a transaction left open by a process that stopped mid-write is
ended by the server, so its row locks cannot hold up the other writers of its runs for ever."""

from __future__ import annotations

import threading

import pytest

import reversi
from reversi.errors import StoreUnavailable
from reversi.store import postgres


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_write_left_idle_in_its_transaction_is_ended_and_stops_holding_up_the_run(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION_MS", 300)  # 15 s in service
    with reversi.open(db_url) as stalled, reversi.open(db_url) as other:
        run = stalled.start_run()
        locked, went_on = threading.Event(), threading.Event()
        outcome: list[BaseException] = []

        def stall() -> None:  # a writer that takes the run's lock and then does nothing, as if stopped
            try:
                with stalled.store.write() as q:
                    q.lock_run(run.id)
                    locked.set()
                    went_on.wait(30)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=stall)
        thread.start()
        assert locked.wait(30)
        step = other.get_run(run.id).begin("jobs.start", {"n": 1})  # waits on the stalled lock until it ends
        went_on.set()
        thread.join(30)

    assert step.index == 0
    assert len(outcome) == 1 and isinstance(outcome[0], StoreUnavailable), outcome
    assert "left idle" in outcome[0].message


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_read_holds_no_transaction_open_so_a_slow_reader_is_not_ended_for_idling(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION_MS", 300)
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        run.begin("jobs.start", {"n": 1}).succeeded({"id": 1})
        with ledger.store.read() as q:
            first = q.get_run(run.id)
            threading.Event().wait(0.8)  # a reader that takes its time between statements
            steps = q.step_records(run.id)
        with ledger.store.write() as q:  # and a read inside a write is part of the write, as before
            q.lock_run(run.id)
            assert q.get_run(run.id) is not None
    assert first is not None and [s.tool for s in steps] == ["jobs.start"]

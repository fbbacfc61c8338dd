"""A run pruned while a process still holds its record (a server's cache, a gateway's binder, an SDK
`Run`): a call recorded in it afterwards is refused as a run that is not there, and leaves no row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import reversi
from reversi.errors import NotFound


def test_a_call_in_a_run_pruned_meanwhile_is_not_found_and_writes_nothing(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        run.begin("jobs.start", {"n": 1}).failed("downstream said no")  # settled: retention may take it
        later = datetime.now(UTC) + timedelta(days=2)
        pruned = [o.run.run_id for o in ledger.pruning(timedelta(days=1), now=later).run() if o.pruned]
        assert pruned == [run.id]
        called: list[int] = []

        with pytest.raises(NotFound, match=f"no run {run.id}"):
            run.call("jobs.start", {"n": 2}, lambda n: called.append(n))

        assert called == []
        with pytest.raises(NotFound):
            ledger.get_run(run.id)
        with ledger.store.read() as q:
            assert q.step_records(run.id) == []

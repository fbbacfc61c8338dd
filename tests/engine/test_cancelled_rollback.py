"""A rollback cancelled while it takes its run's lock gives the lock back.

Found by the fault campaign's probing of `not-recovered` (docs/reliability.md): `arollback` took the lock
in a worker thread; cancelled meanwhile (a timeout around it, or the gateway's operator request cut off),
it left the thread to take the lock for nobody, and every later rollback of the run, in any process, was
refused with "rollback already in progress" until that process ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import reversi


def undo(call: dict[str, Any]) -> dict[str, Any]:
    return {"undone": call["step"]}


def test_a_rollback_cancelled_while_it_takes_the_runs_lock_leaves_the_run_free_to_roll_back(
    ledger: reversi.Ledger,
) -> None:
    run = ledger.start_run()
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})

    async def cancelled_while_locking() -> None:
        first = asyncio.ensure_future(run.arollback(compensate=undo))
        await asyncio.sleep(0)  # it is taking the lock, in a thread
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(cancelled_while_locking())  # returns once its threads are done: the lock was taken by then

    report = run.rollback(compensate=undo)
    assert report.compensated == [0] and report.complete
    assert [e.type for e in run.events() if e.step == 0] == ["intended", "succeeded", "compensating", "compensated"]

"""The async twin of the SDK (issue 29): `reversi.open_async` and `AsyncLedger`, and `Run`'s `a...`
methods, used end to end on both stores; and none of them makes the event loop wait on the store."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.engine.test_event_loop import lock_held_elsewhere

import reversi
from reversi.errors import Halted

MANIFEST = """\
version: 1
tools:
  stripe.create_charge:
    compensation: {tool: stripe.refund, args: {id: "$result.id"}, requires_approval: true}
"""


def test_an_async_agent_and_operator_do_everything_without_the_sync_api(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)

    async def charge(amount: int) -> dict[str, Any]:
        return {"id": f"ch_{amount}"}

    async def scenario() -> None:
        async with await reversi.open_async(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
            run = await ledger.astart_run(run_id="run_async-1", actor="billing-agent")
            await run.acall("stripe.create_charge", {"amount": 700}, charge)
            run.begin("stripe.create_charge", {"amount": 900}).uncertain("read timed out")
            assert [s.status.value for s in await run.asteps()] == ["succeeded", "uncertain"]
            await run.aresolve(1, "succeeded", {"id": "ch_900"}, note="found it in the dashboard")
            halt = await ledger.aadd_halt("incident", tool="stripe.*")
            assert [h.halt_id for h in await ledger.ahalts()] == [halt.halt_id]
            with pytest.raises(Halted):
                await run.acall("stripe.create_charge", {"amount": 5}, charge)
            assert await ledger.alift_halts(halt.halt_id) == 1
            assert [a.kind.value for a in (await run.aplan()).actions] == ["compensate", "compensate"]
            first = await run.arollback(lambda call: {"refunded": call["args"]["id"]})
            assert [w.step for w in first.awaiting_approval] == [1, 0]
            pending = await ledger.aapprovals(status="pending", run_id=run.id)
            for approval in pending:
                await ledger.aapprove(approval.approval_id, by="olu", note="refund both")
            again = await (await ledger.aget_run(run.id)).arollback(lambda call: {"refunded": call["args"]["id"]})
            assert again.compensated == [1, 0] and again.complete
            assert [r.run.run_id for r in await ledger.alist_runs()] == ["run_async-1"]
            assert "refused" in {e.type for e in await run.aevents()}

    asyncio.run(scenario())


def test_a_write_that_waits_for_the_lock_leaves_the_loop_free(db_url: str) -> None:
    """While `aresolve` waits for a lock held elsewhere, another task of the loop runs (and it is that
    task that lets the lock go): a method that blocked the loop would finish only at the deadline,
    after the other task."""
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        run.begin("t", {}).uncertain("timed out")
    order: list[str] = []
    released = threading.Event()

    async def scenario(ledger: reversi.AsyncLedger) -> None:
        async with ledger:
            again = await ledger.aget_run(run.id)

            started = asyncio.Event()

            async def resolve() -> None:
                started.set()
                await again.aresolve(0, "failed", note="never reached the API")
                order.append("resolved")

            resolving = asyncio.create_task(resolve())
            # Back here only once the task gives the loop up: at once if `aresolve` waits in a thread,
            # only after the lock is let go (too late: "resolved" first) if it blocked the loop.
            await started.wait()
            order.append("loop ran")
            released.set()
            await resolving

    opened = reversi.AsyncLedger(reversi.open(db_url))  # opened first: opening writes to the store
    # a generous hold: a method that blocked the loop shows as a slow, failing test, not a hung one
    with lock_held_elsewhere(db_url, run.id, released, hold_s=60):
        asyncio.run(scenario(opened))
    assert order == ["loop ran", "resolved"]
    with reversi.open(db_url) as ledger:
        assert ledger.get_run(run.id).steps()[0].status.value == "failed"

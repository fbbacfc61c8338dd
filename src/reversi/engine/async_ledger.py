"""The SDK for async code: `open_async` and `AsyncLedger`, and the `a...` methods of `Run`.

    async with await reversi.open_async(manifests=["tools.yaml"]) as ledger:
        run = await ledger.astart_run(run_id=f"run_{session_id}", actor="billing-agent")
        await run.acall("stripe.create_charge", {"amount": 700}, create_charge)
        print((await run.aplan()).to_text())
        report = await run.arollback(refund)

Every method does its store reads and writes in a worker thread, so the event loop never waits on
the store: not for SQLite's write lock, not for a PostgreSQL row another process holds. Each is the
`Ledger` method of the same name without its `a`, and raises as it does; `sync` is that `Ledger`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from reversi.core.models import Approval, Halt, RunSummary
from reversi.engine.ledger import Ledger, RunFilter, open
from reversi.engine.run import Run

__all__ = ["AsyncLedger", "open_async"]


async def open_async(
    db: str | None = None, *, manifests: Sequence[str] = (), principal: str | None = None, config: str | None = None,
    durability: str | None = None,
) -> AsyncLedger:
    """`reversi.open` without blocking the loop (opening may migrate the store and read the manifests)."""
    return AsyncLedger(await asyncio.to_thread(open, db, manifests=manifests, principal=principal, config=config,
                                               durability=durability))


class AsyncLedger:
    """A `Ledger` for async code: the same operations, awaited, off the event loop."""

    def __init__(self, ledger: Ledger) -> None:
        self.sync = ledger

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def astart_run(
        self, run_id: str | None = None, *, actor: str = "", tenant: str = "", environment: str = "",
        mode: str | None = None, labels: dict[str, str] | None = None,
    ) -> Run:
        """`Ledger.start_run`: a new run, or the one `run_id` names continued."""
        return await asyncio.to_thread(lambda: self.sync.start_run(
            run_id, actor=actor, tenant=tenant, environment=environment, mode=mode, labels=labels))

    async def acontinue_run(self, run_id: str) -> Run:
        return await asyncio.to_thread(self.sync.continue_run, run_id)

    async def aget_run(self, run_id: str) -> Run:
        return await asyncio.to_thread(self.sync.get_run, run_id)

    async def alist_runs(self, filters: RunFilter | None = None) -> list[RunSummary]:
        return await asyncio.to_thread(self.sync.list_runs, filters)

    async def aadd_halt(
        self, reason: str, *, tool: str | None = None, actor: str | None = None, tenant: str | None = None,
        environment: str | None = None, by: str | None = None,
    ) -> Halt:
        """`Ledger.add_halt`: stop new calls (all, or those the scope matches)."""
        return await asyncio.to_thread(lambda: self.sync.add_halt(
            reason, tool=tool, actor=actor, tenant=tenant, environment=environment, by=by))

    async def ahalts(self, tenant: str | None = None) -> list[Halt]:
        return await asyncio.to_thread(self.sync.halts, tenant)

    async def alift_halts(self, halt_id: str | None = None, by: str | None = None, tenant: str | None = None) -> int:
        return await asyncio.to_thread(lambda: self.sync.lift_halts(halt_id, by, tenant))

    async def aapprovals(self, status: str | None = None, run_id: str | None = None) -> list[Approval]:
        return await asyncio.to_thread(self.sync.approvals, status, run_id)

    async def aapprove(self, approval_id: str, by: str | None = None, note: str | None = None) -> Approval:
        return await asyncio.to_thread(self.sync.approve, approval_id, by, note)

    async def adeny(self, approval_id: str, note: str, by: str | None = None) -> Approval:
        return await asyncio.to_thread(self.sync.deny, approval_id, note, by)

"""The server's rollback worker: a thread with its own event loop that runs the store's unfinished jobs.

It looks for work when told a job was queued here, and every `poll_s` seconds otherwise, so it also
picks up jobs queued by other servers, jobs whose server died (their run's lease is free again) and
jobs whose server stopped past its lease (taken over; that server's writes are refused if it wakes).
On shutdown the running jobs are cancelled between two journal writes and put back in the queue.
The loop only waits: every read and write of the store (claims, progress, the lease's release)
runs in a thread, so one slow transaction never holds up the other jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from reversi.core.json_values import LooseJSONObject
from reversi.engine.commands import command_compensator, command_read_back
from reversi.engine.jobs import Job, Lease
from reversi.engine.ledger import Ledger
from reversi.engine.scope_jobs import ScopeJob, ScopeJobRunner, unfinished_scope_jobs
from reversi.errors import Fenced, StoreUnavailable
from reversi.server.metrics import Metrics

log = logging.getLogger("reversi.server")
MAX_UNDOS = 16  # undo commands a server runs at once, across all its jobs, whatever each job's concurrency


def at_most(limit: int, compensate: Callable[[LooseJSONObject], Awaitable[object]]
            ) -> Callable[[LooseJSONObject], Awaitable[object]]:
    """`compensate`, of which at most `limit` calls run at once (on the one event loop the worker runs):
    an operator's job at concurrency 64 times several jobs must not start hundreds of processes."""
    gate: asyncio.Semaphore | None = None

    async def bounded(call: LooseJSONObject) -> object:
        nonlocal gate
        gate = gate or asyncio.Semaphore(limit)
        async with gate:
            return await compensate(call)

    return bounded


class JobWorker:
    """Runs up to `max_jobs` rollback jobs at a time, each under its run's rollback lease, and at most
    `max_undos` undo commands at once across them."""

    def __init__(
        self,
        ledger: Ledger,
        compensator_cmd: str,
        reader_cmd: str | None,
        metrics: Metrics,
        *,
        poll_s: float = 2.0,
        max_jobs: int = 4,
        max_undos: int = MAX_UNDOS,
    ) -> None:
        self.ledger = ledger
        read_back = command_read_back(reader_cmd) if reader_cmd else None
        compensate = at_most(max_undos, command_compensator(compensator_cmd))
        self.runner = ledger.job_runner(compensate, read_back, on_done=self._count)
        self.scopes = ScopeJobRunner(ledger, compensate, read_back, ledger.settings.rollback_lease_s)
        self.metrics = metrics
        self.poll_s = poll_s
        self.max_jobs = max_jobs
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._stopping = False
        self._active: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="reversi-jobs", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def wake(self) -> None:
        """Look for work now (a job was just queued)."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the running jobs (they go back to the queue) and end the thread."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop_now)
            self._thread.join(timeout)

    def _stop_now(self) -> None:
        self._stopping = True
        for task in self._active.values():
            task.cancel()
        if self._wake is not None:
            self._wake.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._ready.set()
        while not self._stopping:
            for (job, lease), run in await asyncio.to_thread(self._claim_jobs):
                if self._stopping:  # stopped while claiming: left to the next worker
                    await asyncio.to_thread(lease.release)
                else:
                    self._active[job.job_id] = asyncio.ensure_future(run(job, lease))
            self._wake.clear()
            waiting = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait([waiting, *self._active.values()], timeout=self.poll_s,
                               return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            self._active = {k: t for k, t in self._active.items() if not t.done()}
        if self._active:
            await asyncio.wait(list(self._active.values()))

    def _claim_jobs(self) -> list[tuple[tuple[Any, Lease], Callable[..., Awaitable[None]]]]:
        """Claim the unfinished jobs this worker has room for (in a thread of its own: it reads and writes
        the store), each with the coroutine that runs it."""
        room = self.max_jobs - len(self._active)
        found = self._claim("rollback jobs", self.ledger.unfinished_jobs, self.runner.claim, room)
        found += self._claim("rollback jobs of many runs", lambda: unfinished_scope_jobs(self.ledger),
                             self.scopes.claim, room - len(found))
        return [(claimed, self._run if isinstance(claimed[0], Job) else self._run_scope) for claimed in found]

    def _claim(self, what: str, unfinished: Callable[[], Sequence[Job | ScopeJob]],
               claim: Callable[[str], Any], room: int) -> list[tuple[Any, Lease]]:
        """Claim up to `room` unfinished jobs of one kind that this worker is not running already."""
        if room <= 0:
            return []
        try:
            jobs = unfinished()
        except StoreUnavailable as exc:
            log.warning("cannot look for %s: %s", what, exc.message)
            return []
        found: list[tuple[Any, Lease]] = []
        for job in jobs:
            if job.job_id in self._active or len(found) >= room:
                continue
            try:
                claimed = claim(job.job_id)
            except StoreUnavailable as exc:
                log.warning("cannot claim rollback job %s: %s", job.job_id, exc.message)
                break
            if claimed is not None:
                found.append(claimed)
        return found

    async def _run(self, job: Job, lease: Lease) -> None:
        await self._hold(f"rollback job {job.job_id} of {job.row.run_id}", lease, lambda: self.runner.run(job, lease),
                         lambda: self.ledger.requeue_job(job, lease))

    async def _run_scope(self, job: ScopeJob, lease: Lease) -> None:
        name = f"rollback job {job.job_id} of many runs"

        async def run() -> None:
            done = await self.scopes.run(job, lease)
            self._counted(name, done.row.report, done.row.error)

        await self._hold(name, lease, run, lambda: self.scopes.requeue(job, lease))

    async def _hold(self, name: str, lease: Lease, run: Callable[[], Awaitable[Any]],
                    requeue: Callable[[], None]) -> None:
        """Run a claimed job under its lease: taken over, it stops; on shutdown it goes back to the queue.
        The lease is let go of in a thread (that is a write)."""
        try:
            try:
                log.info("%s: running", name)
                await run()
            except Fenced as exc:
                log.warning("%s: %s", name, exc.message)
            except asyncio.CancelledError:
                with contextlib.suppress(StoreUnavailable, Fenced):  # taken over: the job is another's now
                    # shielded: the task is being cancelled, and the write must still land
                    await asyncio.shield(asyncio.to_thread(requeue))
                log.info("%s: stopped by shutdown, left to resume", name)
                raise
            except StoreUnavailable as exc:
                log.warning("%s: store unavailable, will retry: %s", name, exc.message)
        finally:
            await asyncio.shield(asyncio.to_thread(lease.release))

    def _count(self, job: Job) -> None:
        self._counted(f"rollback job {job.job_id} of {job.row.run_id}", job.row.report, job.row.error)

    def _counted(self, name: str, report: Mapping[str, object] | None, error: object) -> None:
        outcome = "error" if error else ("complete" if report and report.get("complete") else "incomplete")
        self.metrics.rollbacks.labels(outcome).inc()
        log.info("%s: done (%s)", name, outcome)

"""Rollback leases: one holder per run at a time, a fencing token per claim, taken over when stale.

A rollback claims its run by writing the next fencing token into `rollback_leases`, with a lease
(`until`) that a thread of the holder renews every third of it. Each token also has a lock tied to the
holder's process (the back end's: a PostgreSQL session advisory lock, an OS file lock), which says
whether that holder is alive. A claimant finds the run:

* free (never claimed, or released): it claims it;
* held, and the holder's process lock is free: the holder died; it claims it at once;
* held by a live process whose lease ran out (stopped with SIGSTOP, cut off, hung): it takes it over;
* held by a live process within its lease: `rollback already in progress`.

A claim is a compare-and-set on the token, made under the run's write lock, so of two claimants one
wins. Every journal write of the rollback checks the token in its own transaction (`Lease.check`): a
holder that was taken over has its writes refused (`Fenced`) and stops. The stale holder's process
lock is left alone (its token is dead already; a PostgreSQL session is not terminated): it goes when
that process wakes and stops, or dies.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reversi.errors import Fenced, ReversiError
from reversi.store.sql import fill, load
from reversi.store.statements import Statements, guarded

if TYPE_CHECKING:
    from reversi.store.base import Store
    from reversi.store.queries import Queries

DEFAULT_LEASE_S = 30.0
_CLAIM_TRIES = 3
_SQL = load("leases.sql")
_CHECK_LEASE = guarded(_SQL["check_lease"])


@dataclass(frozen=True)
class LeaseRow:
    token: int
    holder: str
    until: float | None  # None: released
    now: float  # the store's clock when read

    @property
    def released(self) -> bool:
        return self.until is None

    @property
    def expired(self) -> bool:
        return self.until is not None and self.until < self.now


class LeaseQueries(Statements):
    """The queries of `rollback_leases` (`leases.sql`); times are the store's clock (`Dialect.now_s`)."""

    def lease(self, run_id: str) -> LeaseRow | None:
        row = self._exec(fill(_SQL["lease"], now=self._dialect.now_s), (run_id,)).fetchone()
        return LeaseRow(int(row[0]), row[1], None if row[2] is None else float(row[2]), float(row[3])) if row else None

    def take_lease(self, run_id: str, expected: int | None, token: int, holder: str, lease_s: float) -> bool:
        """Set the run's token to `token` if it is still `expected` (None: the run was never claimed)."""
        now = self._dialect.now_s
        if expected is None:
            found = self._exec(fill(_SQL["first_lease"], now=now), (run_id, token, holder, lease_s)).fetchone()
        else:
            found = self._exec(fill(_SQL["take_lease"], now=now), (token, holder, lease_s, run_id, expected)).fetchone()
        return found is not None

    def renew_lease(self, run_id: str, token: int, lease_s: float) -> bool:
        """Extend the lease of `token`; False when it is no longer the run's (taken over) or released."""
        found = self._exec(fill(_SQL["renew_lease"], now=self._dialect.now_s), (lease_s, run_id, token)).fetchone()
        return found is not None

    def release_lease(self, run_id: str, token: int) -> None:
        self._exec(_SQL["release_lease"], (run_id, token))

    def check_lease(self, run_id: str, token: int, *, lock_run: bool = False) -> None:
        """Raise Fenced unless `token` still holds the run (call it under the run's write lock); with
        `lock_run`, take that lock (`lock_run()`) in the same statement, one round trip fewer.

        Where writers take row locks (PostgreSQL), the lease's row is read locked too: a statement
        that waited for the run's lock reads the other tables as they were when it began, but a row it
        locks as it was last committed, so a claim that took the run over meanwhile is seen."""
        sql, lock = self._guarded(_CHECK_LEASE, run_id if lock_run else None)
        row = self._exec(sql, (*lock, run_id)).fetchone()
        if row is None or int(row[0]) != token or row[1] is None:
            raise Fenced(run_id, token, int(row[0]) if row is not None and int(row[0]) != token else None)


class ProcessLock(abc.ABC):
    """A lock that the holder's process keeps until it lets go or dies."""

    @abc.abstractmethod
    def release(self) -> None: ...


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    """A rollback's hold on a run: fencing token `token`, renewed by a thread every third of `lease_s`
    until released (the process lock goes with it)."""

    def __init__(self, store: Store, run_id: str, token: int, lock: ProcessLock, lease_s: float,
                 renewed_at: float) -> None:
        self.store, self.run_id, self.token, self.lease_s = store, run_id, token, lease_s
        self._lock: ProcessLock | None = lock
        self._safe_until = renewed_at + lease_s  # monotonic; the store's `until` is later than this
        self._lost = False
        self._finished = False  # released by `finish`, in the write that ended the rollback
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_released, name=f"reversi-lease-{run_id}",
                                        daemon=True)
        self._thread.start()

    def check(self, q: Queries, *, lock_run: bool = False) -> None:
        """Raise Fenced if this hold was taken over; call it in every journal write, under the run's lock
        (or with `lock_run`, which takes that lock in the same statement: `lock_run()` then `check`)."""
        try:
            q.check_lease(self.run_id, self.token, lock_run=lock_run)
        except Fenced:
            self._lost = True
            raise

    @contextlib.contextmanager
    def fenced(self) -> Iterator[Queries]:
        """A write transaction that lands only while this hold is still the run's (Fenced otherwise)."""
        with self.store.write() as q:
            self.check(q, lock_run=True)
            yield q

    def ensure(self) -> None:
        """Raise Fenced if this hold may have been taken over; call it before acting outside the store.

        Raises:
            Fenced: it was taken over (or released).
            StoreUnavailable: its lease is running out and the store cannot be reached to renew it.
        """
        if self._lost:
            raise Fenced(self.run_id, self.token, None)
        if time.monotonic() > self._safe_until - self.lease_s / 3 and not self.renew():
            raise Fenced(self.run_id, self.token, None)

    async def aensure(self) -> None:
        """`ensure` for an event loop: while the lease is surely this hold's, answered from memory; only a
        renewal (the store) is awaited off the loop."""
        if self._lost or time.monotonic() > self._safe_until - self.lease_s / 3:
            await asyncio.to_thread(self.ensure)

    def renew(self) -> bool:
        """Extend the lease now; False once it was taken over (or released).

        Raises:
            StoreUnavailable: the store could not be reached; the lease stays as it was.
        """
        if self._lost:
            return False
        started = time.monotonic()
        with self.store.write() as q:
            kept = q.renew_lease(self.run_id, self.token, self.lease_s)
        if kept:
            self._safe_until = started + self.lease_s
        else:
            self._lost = True
        return kept

    def _renew_until_released(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.renew():
                    return
            except ReversiError:
                continue  # the store failed: try again next time (the lease may run out meanwhile)

    def finish(self, q: Queries) -> None:
        """Release the run inside the caller's write (which also journals the rollback's end)."""
        q.release_lease(self.run_id, self.token)
        self._finished = True

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        self._stop.set()
        if self._lock is None:
            return
        if not self._lost and not self._finished:
            # a store that fails here leaves the lease to run out by itself
            with contextlib.suppress(ReversiError), self.store.write() as q:
                q.release_lease(self.run_id, self.token)
        self._lock.release()
        self._lock = None


def claim(store: Store, run_id: str, lease_s: float = DEFAULT_LEASE_S) -> Lease | None:
    """Claim `run_id` for a rollback (see the module's docstring); None while a live holder has it."""
    for _ in range(_CLAIM_TRIES):
        with store.read() as q:
            current = q.lease(run_id)
        if current is not None and not current.released and not current.expired \
                and _alive(store, run_id, current.token):
            return None  # (past its lease, dead or stopped alike, the holder is taken over)
        token = current.token + 1 if current is not None else 1
        lock = store.process_lock(run_id, token)
        if lock is None:
            return None  # another claimant is taking this token
        started = time.monotonic()
        try:
            with store.write() as q:
                q.lock_run(run_id)  # after any journal write of the holder in flight, before its next
                taken = q.take_lease(run_id, current.token if current else None, token, holder_name(), lease_s)
        except BaseException:
            lock.release()
            raise
        if taken:
            return Lease(store, run_id, token, lock, lease_s, started)
        lock.release()  # someone claimed it since we read: look again
    return None


def held(store: Store, run_id: str) -> bool:
    """Whether a live holder has the run within its lease (a claim now would say `in progress`)."""
    with store.read() as q:
        current = q.lease(run_id)
    return current is not None and not current.released and not current.expired and _alive(
        store, run_id, current.token)


def _alive(store: Store, run_id: str, token: int) -> bool:
    lock = store.process_lock(run_id, token, dead_holder_grace=True)
    if lock is None:
        return True
    lock.release()
    return False

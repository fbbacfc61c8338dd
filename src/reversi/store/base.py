"""The one interface every back end implements (`reversi.store.factory` picks one by URL)."""

from __future__ import annotations

import abc
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from reversi.core.envelope import Keyring
from reversi.core.models import utc_now
from reversi.errors import RollbackInProgress, StoreUnavailable, WriteConflict
from reversi.store.data_keys import CLEAR, Vault
from reversi.store.group_commit import GroupCommit
from reversi.store.leases import DEFAULT_LEASE_S, Lease, ProcessLock, claim, held
from reversi.store.queries import Queries
from reversi.store.statements import Dialect

T = TypeVar("T")
_RETRIES = 3

class Store(abc.ABC):
    """A ledger back end: transactions over the shared queries, and the per-run rollback lock."""

    url: str
    _group_commit: GroupCommit
    # Errors after which `fn` was undone and may simply run again (a deadlock the database broke).
    _retryable: tuple[type[Exception], ...] = ()

    @abc.abstractmethod
    def read(self) -> AbstractContextManager[Queries]:
        """A read-only transaction: a consistent view of the ledger."""

    @abc.abstractmethod
    def write(self) -> AbstractContextManager[Queries]:
        """A write transaction; it commits when the block ends without an exception.

        Raises:
            StoreUnavailable: the store stayed locked or unreachable after brief retries.
        """

    def write_holding_halts(self) -> AbstractContextManager[Queries]:
        """`write`, for a transaction that decides on the halts in force: no halt commits between its
        start and its end, and one that committed before its start is seen by it. A halt is added
        under `lock_name("system_events")`; where writers are not serialised already (PostgreSQL),
        this transaction holds that name shared from its start (before any run's lock, so that a
        halt waiting for it waits on nothing else). So no call is let through after a halt's commit."""
        return self.write()

    def run_write(self, fn: Callable[[Queries], T], order: str | None = None, *, reads_halts: bool = False) -> T:
        """Run `fn` in a write transaction whose commit may be shared with concurrent writers.

        An exception from `fn` undoes only `fn`'s own writes and is raised to this caller, except
        `KeepWrites(error)`, which keeps them and raises `error`. `fn` may run more than once (after
        a deadlock the database broke), so it must decide from what it reads. `order` names what
        `fn` locks first (its run's id): a shared transaction runs its writes in that order. With
        `reads_halts`, `fn` decides on the halts in force: its transaction is opened by
        `write_holding_halts`, so no halt commits between that read and its commit.

        Raises:
            StoreUnavailable: the store stayed locked or unreachable after brief retries.
            WriteConflict: the database kept undoing the write to break lock cycles.
        """
        for attempt in range(_RETRIES + 1):
            try:
                return self._group_commit.run(fn, order, reads_halts=reads_halts)
            except self._retryable_errors() as exc:
                if attempt == _RETRIES:
                    raise _gave_up(exc) from exc
                # the database broke a lock cycle by undoing `fn`: run it again
        raise AssertionError("unreachable")

    async def arun_write(
        self, fn: Callable[[Queries], T], order: str | None = None, *, reads_halts: bool = False,
    ) -> T:
        """`run_write` for an event loop: `fn` runs on the writer thread, and the loop is never blocked
        (see `GroupCommit.arun`)."""
        for attempt in range(_RETRIES + 1):
            try:
                return await self._group_commit.arun(fn, order, reads_halts=reads_halts)
            except self._retryable_errors() as exc:
                if attempt == _RETRIES:
                    raise _gave_up(exc) from exc
        raise AssertionError("unreachable")

    def defer_write(self, fn: Callable[[Queries], object], order: str | None = None) -> None:
        """Hand `fn` to be committed soon, without waiting for it (see `GroupCommit.defer`): a crash
        before its commit loses it. A read or a write of this process opened after this call sees it;
        `flush_writes` and `close` wait for it. Retried as `run_write` is, and after a store error too (a
        dropped connection is taken anew), a few times over about a second; a failure past that is logged."""
        retried: tuple[type[Exception], ...] = (StoreUnavailable, *self._retryable_errors())
        self._group_commit.defer(fn, order, lambda exc: isinstance(exc, retried))

    def flush_writes(self) -> None:
        """Wait until every write `defer_write` was given has committed.

        Raises:
            StoreUnavailable: the commit failed.
        """
        self._group_commit.flush()

    def _retryable_errors(self) -> tuple[type[Exception], ...]:
        return (WriteConflict, *self._retryable)

    @abc.abstractmethod
    def process_lock(self, run_id: str, token: int, *, dead_holder_grace: bool = False) -> ProcessLock | None:
        """The lock of fencing token `token` of the run, tied to this process, if it is free (see
        `reversi.store.leases`). With `dead_holder_grace`, a lock whose holder just died is given the
        moment the back end takes to notice."""

    def try_lock_run(self, run_id: str, lease_s: float = DEFAULT_LEASE_S) -> Lease | None:
        """The run's rollback lease if nobody alive holds it within theirs, else None."""
        return claim(self, run_id, lease_s)

    def lock_run(self, run_id: str, lease_s: float = DEFAULT_LEASE_S) -> Lease:
        """The run's rollback lease (see `reversi.store.leases`).

        Raises:
            RollbackInProgress: another holder, in this process or any other, has it within its lease.
        """
        lock = self.try_lock_run(run_id, lease_s)
        if lock is None:
            raise RollbackInProgress(run_id)
        return lock

    def use_keyring(self, keyring: Keyring | None) -> None:
        """Seal the values this process writes under `keyring`'s current KEK, and open those sealed under
        any of its KEKs (None: write in clear; sealed values read as unreadable)."""
        self._dialect_of().vault = Vault(keyring) if keyring is not None else CLEAR

    @property
    def vault(self) -> Vault:
        """How this store keeps values (see `use_keyring`)."""
        return self._dialect_of().vault

    @abc.abstractmethod
    def _dialect_of(self) -> Dialect:
        """The dialect every transaction's `Queries` is made with."""

    def secret(self, name: str) -> bytes:
        """The store's own secret called `name` (32 random bytes, made on first use, the same for every
        process on this store), kept for the life of this object.

        Raises:
            StoreUnavailable: as `run_write`.
        """
        kept: dict[str, bytes] = self.__dict__.setdefault("_secrets", {})
        if name not in kept:
            with self.read() as q:  # made with the schema (`schema.MADE_SECRETS`): a read finds it
                found = q.read_secret(name)
            if found is None:
                made, now = secrets.token_hex(32), utc_now()
                found = self.run_write(lambda q: q.store_secret(name, made, now))
            kept[name] = bytes.fromhex(found)
        return kept[name]

    def rollback_held(self, run_id: str) -> bool:
        """Whether a live holder has the run's rollback lease (a claim now would be refused)."""
        return held(self, run_id)

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _gave_up(exc: Exception) -> WriteConflict:
    if isinstance(exc, WriteConflict):
        return exc
    return WriteConflict(f"the store kept undoing a write to break lock cycles ({_RETRIES + 1} attempts): {exc}")

"""Group commit: concurrent writers share one transaction, so one fsync serves many journal writes.

Each writer hands in a function of the transaction's `Queries`. Whoever arrives while no batch is
being written becomes the leader: it takes every function queued so far, runs each inside its own
savepoint of one write transaction, commits once, and wakes the writers of that batch. A function
that raises rolls back its own savepoint only; its caller gets the exception, the rest of the batch
commits. With a single writer this is one transaction per call, as before.

Writers wait in one of two ways. A thread (`run`) blocks on its own event; if writes queued up
behind its batch, it hands the lead to the next waiting thread before it returns. An event loop
(`arun`) waits on a future; every write of every loop is led by one writer thread, so no loop ever
waits on the store, not even for a lone request's commit (its fsync could take milliseconds, and
the loop would answer nobody meanwhile). Each writer is woken once, when its own write is done (no
thundering herd).

A write may also be deferred (`defer`): nobody waits for it. It stays queued until the next write
takes it into its batch (ahead of that write, so a run's events keep their order), or until it has
waited `DEFER_BOUND_S`, when a background thread commits it. `settled()` opens a transaction only
after every write this process deferred has committed, so a read sees them.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Generic, TypeVar

from reversi.errors import KeepWrites
from reversi.store.queries import Queries
from reversi.store.sql import load

T = TypeVar("T")
_HELPER_IDLE_S = 5.0
DEFER_BOUND_S = 0.01  # how long a deferred write waits for another write to share its commit
_DEFER_ATTEMPTS = 4
_DEFER_BACKOFF_S = 0.1  # before a deferred write's second attempt; doubled for each after it (0.7 s in all)
log = logging.getLogger("reversi.store")
_SQL = load("group_commit.sql")


class _Slot(Generic[T]):
    __slots__ = ("attempts", "deadline", "deferred", "done", "error", "fn", "future", "order", "reads_halts",
                 "result", "retry", "wake")

    def __init__(
        self,
        fn: Callable[[Queries], T],
        future: asyncio.Future[None] | None = None,
        *,
        waits: bool = True,
        order: str | None = None,
        reads_halts: bool = False,
    ) -> None:
        self.fn = fn
        self.order = order  # what the write locks first (a run id): a shared batch writes in this order
        self.reads_halts = reads_halts  # it decides on the halts in force (`Store.write_holding_halts`)
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None
        self.future = future  # an event loop's waiter; None for a thread, which waits on `wake`
        self.wake = threading.Event() if future is None and waits else None
        self.deferred = False  # nobody waits for it (`GroupCommit.defer`)
        self.deadline = 0.0  # a deferred write's: when the background thread commits it
        self.attempts = 0
        self.retry: Callable[[BaseException], bool] | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


def _finish(batch: list[_Slot[Any]]) -> None:
    """Wake the batch's writers: each thread by its event, each event loop once for all its futures."""
    futures: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for slot in batch:
        slot.done = True
        if slot.future is not None:
            futures.setdefault(slot.future.get_loop(), []).append(slot.future)
        elif slot.wake is not None:
            slot.wake.set()
    for loop, waiting in futures.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: its writers went with it (a rollback stopped)
            loop.call_soon_threadsafe(_settle, waiting)


def _settle(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # a caller that was cancelled has gone; its write landed all the same
            future.set_result(None)


class GroupCommit:
    """Batches write functions into shared transactions opened by `begin`.

    `begin_halts` opens the transaction of a batch with a write that reads the halts
    (`Store.write_holding_halts`); without it, `begin` serves those too.
    """

    def __init__(
        self,
        begin: Callable[[], AbstractContextManager[Queries]],
        begin_halts: Callable[[], AbstractContextManager[Queries]] | None = None,
    ) -> None:
        self._begin = begin
        self._begin_halts = begin_halts or begin
        self._lock = threading.Lock()
        self._queue: list[_Slot[Any]] = []
        self._leading = False
        self._helper: threading.Thread | None = None
        self._helper_wake = threading.Event()
        self._deferred: collections.deque[_Slot[Any]] = collections.deque()  # oldest first; done ones linger
        self._pending = 0  # deferred writes not yet committed (nor given up on)
        self._flusher: threading.Thread | None = None
        self._local = threading.local()  # `depth`: how many transactions of ours this thread is inside
        _LIVE.add(self)

    def _forget(self) -> None:
        """Drop every queued write and the threads' state: a forked child's copy of its parent's."""
        self._lock = threading.Lock()
        self._queue, self._leading, self._helper, self._flusher = [], False, None, None
        self._helper_wake = threading.Event()
        self._deferred.clear()
        self._pending = 0

    def run(self, fn: Callable[[Queries], T], order: str | None = None, *, reads_halts: bool = False) -> T:
        """Run `fn` in a committed write transaction, possibly shared with concurrent callers; `order`
        and `reads_halts` as for `Store.run_write`."""
        slot = _Slot(fn, order=order, reads_halts=reads_halts)
        with self._lock:
            self._queue.append(slot)
            follow, self._leading = self._leading, True
        if follow:
            assert slot.wake is not None
            slot.wake.wait()
            if slot.done:
                return slot.outcome()
            # not done, yet woken: the previous leader handed the lead to this thread
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._write(batch)  # the batch holds this thread's own write
        finally:
            self._pass_lead()
        return slot.outcome()

    async def arun(self, fn: Callable[[Queries], T], order: str | None = None, *, reads_halts: bool = False) -> T:
        """`run` for an event loop: `fn` is written by the writer thread, and the loop waits for its commit
        without blocking."""
        slot = _Slot(fn, asyncio.get_running_loop().create_future(), order=order, reads_halts=reads_halts)
        with self._lock:
            self._queue.append(slot)
            if not self._leading:
                self._leading = True
                self._hand_to_helper()
        assert slot.future is not None
        await slot.future  # cancelling this wait does not cancel the write: it lands, as from a thread
        return slot.outcome()

    def defer(
        self, fn: Callable[[Queries], object], order: str | None = None,
        retry: Callable[[BaseException], bool] | None = None,
    ) -> None:
        """Queue `fn` to be committed soon, and return without waiting for it: with the next write's batch
        (ahead of that write), else by a background thread once it has waited `DEFER_BOUND_S`. Nobody
        hears how it went: when it raises, `retry(error)` says whether to run it again (at the head of
        the queue, a few times at most); otherwise the error is logged and its writes are undone."""
        slot: _Slot[Any] = _Slot(fn, waits=False, order=order)
        slot.deferred, slot.retry, slot.deadline = True, retry, time.monotonic() + DEFER_BOUND_S
        with self._lock:
            self._queue.append(slot)
            self._deferred.append(slot)
            self._pending += 1
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_when_due, name="reversi-deferred-writes",
                                                 daemon=True)
                self._flusher.start()

    def flush(self) -> None:
        """Wait until every write deferred so far has committed (or been given up on). Inside a write of
        this thread's it returns at once: that write's own batch holds whatever was queued before it.

        Raises:
            Exception: as the store's writes raise, when the commit fails.
        """
        for attempt in range(_DEFER_ATTEMPTS):  # a deferred write tried again goes round once more
            if not self._pending or self._depth():
                return
            try:
                self.run(_nothing)
            except Exception:
                if attempt + 1 == _DEFER_ATTEMPTS or not self._pending:
                    raise  # (while deferred writes are still being tried, their next try may take)

    @contextmanager
    def settled(self) -> Iterator[None]:
        """A block that sees every write this process deferred: `flush` first, unless this thread is
        already inside a transaction of this store (flushing there could wait on itself)."""
        depth = self._depth()
        if not depth and self._pending:
            self.flush()
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth

    def _depth(self) -> int:
        depth: int = getattr(self._local, "depth", 0)
        return depth

    def _flush_when_due(self) -> None:
        """The background thread of `defer`: commit the oldest deferred write once it is due, if no other
        write has taken it along by then; end when none is left."""
        while True:
            with self._lock:
                while self._deferred and self._deferred[0].done:
                    self._deferred.popleft()
                if not self._deferred:
                    self._flusher = None
                    return
                due = self._deferred[0].deadline - time.monotonic()
                if due <= 0 and not self._leading and self._queue:
                    self._leading = True
                    self._hand_to_helper()
            time.sleep(due if due > 0 else DEFER_BOUND_S)

    def _pass_lead(self) -> None:
        """After a thread's batch: give the lead to whoever queued up behind it, or drop it."""
        with self._lock:
            if not self._queue:
                self._leading = False
            elif self._queue[0].wake is not None:
                self._queue[0].wake.set()  # that thread finds its write not done, so it leads
            else:
                self._hand_to_helper()

    def _hand_to_helper(self) -> None:
        """Give the lead to the helper thread, starting it if idle (the caller holds the lock)."""
        self._helper_wake.set()
        if self._helper is None:
            self._helper = threading.Thread(target=self._help, name="reversi-group-commit", daemon=True)
            self._helper.start()

    def _help(self) -> None:
        """The helper thread: lead whenever handed the lead; end after a while without work."""
        while True:
            if not self._helper_wake.wait(_HELPER_IDLE_S):
                with self._lock:
                    if not self._helper_wake.is_set():
                        self._helper = None
                        return
                continue
            self._helper_wake.clear()
            while True:
                with self._lock:
                    if not self._queue:
                        self._leading = False
                        break
                    batch, self._queue = self._queue, []
                self._write(batch)

    def _write(self, batch: list[_Slot[Any]]) -> None:
        try:
            if len(batch) == 1:  # unshared: the transaction itself is the savepoint (saves two round trips)
                self._write_unshared(batch[0])
            else:
                self._write_shared(batch)
        finally:
            _finish(self._after_deferred(batch) if self._pending else batch)

    def _after_deferred(self, batch: list[_Slot[Any]]) -> list[_Slot[Any]]:
        """The slots of a written batch that are done: a deferred write that failed and may be tried again
        goes back to the head of the queue instead (ahead of any later write of its run)."""
        again, done, finished = [], [], 0
        for slot in batch:
            if not slot.deferred:
                done.append(slot)
            elif slot.error is not None and slot.attempts + 1 < _DEFER_ATTEMPTS and slot.retry is not None \
                    and slot.retry(slot.error):
                slot.attempts, slot.error, slot.result = slot.attempts + 1, None, None
                again.append(slot)
                # a store that dropped its connection is given a moment to take a new one (the next
                # writes, which would fail the same way, wait too)
                time.sleep(_DEFER_BACKOFF_S * 2 ** (slot.attempts - 1))
            else:
                if slot.error is not None:
                    log.warning("a deferred journal write failed, and its step stays as it was: %s", slot.error)
                done.append(slot)
                finished += 1
        with self._lock:
            self._queue[:0] = again
            self._pending -= finished
        return done

    @contextmanager
    def _inside(self) -> Iterator[None]:
        """Mark this thread as inside one of our transactions (see `settled`)."""
        depth = self._depth()
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth

    def _write_shared(self, batch: list[_Slot[Any]]) -> None:
        # Every batch takes the locks of its runs in one order, so two processes' batches never wait
        # on each other in a cycle (PostgreSQL would break it by undoing one of them).
        ordered = sorted(batch, key=lambda slot: (slot.order is None, slot.order or ""))
        begin = self._begin_halts if any(slot.reads_halts for slot in batch) else self._begin
        try:
            with self._inside(), begin() as q:
                for slot in ordered:
                    q.execute(_SQL["savepoint"])
                    try:
                        slot.result = slot.fn(q)
                    except KeepWrites as kept:
                        slot.error = kept.error
                    except Exception as exc:
                        q.execute(_SQL["rollback_to_savepoint"])
                        slot.error = exc
                    q.execute(_SQL["release_savepoint"])
        except BaseException as exc:  # the commit itself failed: nobody's write landed
            for slot in batch:
                if slot.error is None:
                    slot.error, slot.result = exc, None
            if not isinstance(exc, Exception):
                raise

    def _write_unshared(self, slot: _Slot[Any]) -> None:
        try:
            with self._inside(), (self._begin_halts if slot.reads_halts else self._begin)() as q:
                try:
                    slot.result = slot.fn(q)
                except KeepWrites as kept:
                    slot.error = kept.error
        except Exception as exc:
            slot.error, slot.result = exc, None


def _nothing(q: Queries) -> None:
    return None


_LIVE: weakref.WeakSet[GroupCommit] = weakref.WeakSet()


def _forget_in_child() -> None:
    """A forked child shares its parent's connections and inherits none of its threads: it must never
    commit (or wait for) the writes its parent deferred, at exit or otherwise."""
    for group in list(_LIVE):
        group._forget()
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _flush_at_exit() -> None:
    """Commit what is still deferred when the interpreter exits (a store closed already cannot be)."""
    for group in list(_LIVE):
        with contextlib.suppress(Exception):
            group.flush()

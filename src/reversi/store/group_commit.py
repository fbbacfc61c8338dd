"""Group commit: concurrent writers share one transaction, so one fsync serves many journal writes.

Each writer hands in a function of the transaction's `Queries`. Whoever arrives while no batch is
being written becomes the leader: it takes every function queued so far, runs each inside its own
savepoint of one write transaction, commits once, and wakes the others. A function that raises
rolls back its own savepoint only; its caller gets the exception, the rest of the batch commits.
With a single writer this is one transaction per call, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from reversi.store.queries import Queries

T = TypeVar("T")


class _Slot(Generic[T]):
    __slots__ = ("done", "error", "fn", "result")

    def __init__(self, fn: Callable[[Queries], T]) -> None:
        self.fn = fn
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupCommit:
    """Batches write functions into shared transactions opened by `begin`."""

    def __init__(self, begin: Callable[[], AbstractContextManager[Queries]]) -> None:
        self._begin = begin
        self._cv = threading.Condition()
        self._queue: list[_Slot[Any]] = []
        self._leading = False

    def run(self, fn: Callable[[Queries], T]) -> T:
        """Run `fn` in a committed write transaction, possibly shared with concurrent callers."""
        slot = _Slot(fn)
        with self._cv:
            self._queue.append(slot)
            while self._leading and not slot.done:
                self._cv.wait()
            if slot.done:
                return slot.outcome()
            self._leading = True
            batch, self._queue = self._queue, []
        try:
            self._write(batch)
        finally:
            with self._cv:
                self._leading = False
                self._cv.notify_all()
        return slot.outcome()

    def _write(self, batch: list[_Slot[Any]]) -> None:
        if len(batch) == 1:  # alone: the transaction itself is the savepoint (saves two round trips)
            self._write_alone(batch[0])
            return
        try:
            with self._begin() as q:
                for slot in batch:
                    q.execute("SAVEPOINT reversi_write")
                    try:
                        slot.result = slot.fn(q)
                    except Exception as exc:
                        q.execute("ROLLBACK TO SAVEPOINT reversi_write")
                        slot.error = exc
                    q.execute("RELEASE SAVEPOINT reversi_write")
        except BaseException as exc:  # the commit itself failed: nobody's write landed
            for slot in batch:
                if slot.error is None:
                    slot.error, slot.result = exc, None
            if not isinstance(exc, Exception):
                raise
        finally:
            for slot in batch:
                slot.done = True

    def _write_alone(self, slot: _Slot[Any]) -> None:
        try:
            with self._begin() as q:
                slot.result = slot.fn(q)
        except Exception as exc:
            slot.error, slot.result = exc, None
        finally:
            slot.done = True

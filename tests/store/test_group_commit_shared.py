"""Group commit: when the commit of a batch that several writers share fails, every one of them hears so.

The faults elsewhere (a full disk, a PostgreSQL that goes away) hit one writer at a time, whose batch
holds its write alone. Here three writers are lined up so that the first writes alone and the other
two share the next batch, whose transaction then fails to commit: its leader and its follower must
both get the error, and neither write may be found in the journal.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from tests.conftest import WAIT_S, wait_for
from tests.test_group_commit import append_one, journal, store_with_a_run

from reversi.core.models import Event
from reversi.store.base import Store
from reversi.store.group_commit import GroupCommit
from reversi.store.queries import Queries


class CommitFailed(Exception):
    """What the second batch's transaction raises in place of committing."""


class Batches:
    """The store's write transaction, counted; the second one fails once its writes are done, so the
    store rolls it back, as a commit that failed leaves it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.opened = 0

    @contextmanager
    def begin(self) -> Iterator[Queries]:
        self.opened += 1
        mine = self.opened
        with self.store.write() as q:
            yield q
            if mine == 2:
                raise CommitFailed("the commit of the shared batch failed")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with store_with_a_run(db_url) as store:
        yield store


def first_write(gc: GroupCommit, inside: threading.Event) -> Callable[[Queries], list[Event]]:
    """W1's write: it holds the lead until the two others wait in the queue behind it."""

    def fn(q: Queries) -> list[Event]:
        inside.set()
        wait_for(lambda: len(gc._queue) == 2, "two writers to queue behind the first batch", WAIT_S)
        return append_one("w1", 1, q)

    return fn


def test_a_shared_batch_whose_commit_fails_fails_every_thread_in_it(store: Store) -> None:
    batches = Batches(store)
    gc = GroupCommit(batches.begin)
    inside = threading.Event()
    outcomes: dict[str, object] = {}

    def writer(name: str, fn: Callable[[Queries], object]) -> None:
        try:
            outcomes[name] = gc.run(fn)
        except Exception as exc:
            outcomes[name] = exc

    first = threading.Thread(target=writer, args=("w1", first_write(gc, inside)))
    first.start()
    assert inside.wait(WAIT_S)  # W1 leads: whoever comes now queues for the next batch
    others = [threading.Thread(target=writer, args=(name, functools.partial(append_one, name, n)))
              for n, name in enumerate(["w2", "w3"], start=2)]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(WAIT_S)
        assert not t.is_alive()

    assert batches.opened == 2  # W1 alone, then W2 and W3 together
    assert isinstance(outcomes["w1"], list) and outcomes["w1"][0].actor == "w1"
    assert isinstance(outcomes["w2"], CommitFailed)  # the leader of the shared batch
    assert isinstance(outcomes["w3"], CommitFailed)  # its follower, told by the leader
    assert journal(store) == [("w1", {"i": 1})]


def test_a_shared_batch_whose_commit_fails_fails_every_coroutine_in_it(store: Store) -> None:
    """The same from an event loop: the helper thread leads both batches and wakes the futures."""
    batches = Batches(store)
    gc = GroupCommit(batches.begin)
    inside = threading.Event()

    async def main() -> list[object]:
        lead = asyncio.ensure_future(gc.arun(first_write(gc, inside)))
        await asyncio.to_thread(inside.wait, WAIT_S)
        assert inside.is_set()
        rest = [gc.arun(functools.partial(append_one, name, n)) for n, name in enumerate(["w2", "w3"], start=2)]
        return list(await asyncio.gather(lead, *rest, return_exceptions=True))

    w1, w2, w3 = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert batches.opened == 2
    assert isinstance(w1, list) and w1[0].actor == "w1"
    assert isinstance(w2, CommitFailed) and isinstance(w3, CommitFailed)
    assert journal(store) == [("w1", {"i": 1})]

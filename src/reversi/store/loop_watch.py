"""Store transactions opened on a thread that runs an event loop, for tests to look for.

A transaction waits for the database (a lock, a round trip, an fsync), and a loop that waits answers
nobody meanwhile; so the server and the gateway reach the store from other threads only. Every
transaction passes through `check` as it starts; inside `watching()` it notes where each one opened
on a loop, which a test then asserts never happened. It looks at which thread asks, never at how
long anything took, so what it finds does not depend on the machine's load. Outside `watching()`
it costs one truth test.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

_found: list[list[str]] = []  # one list per `watching()` block in force
_lock = threading.Lock()


def check() -> None:
    """Note the caller's stack in every `watching()` block in force if this thread runs an event loop."""
    if not _found:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    where = "".join(traceback.format_stack(limit=12)[:-1])
    with _lock:
        for found in _found:
            found.append(f"{threading.current_thread().name}:\n{where}")


@contextmanager
def watching() -> Iterator[list[str]]:
    """Within the block, the stacks of the store transactions opened on a thread running an event loop."""
    found: list[str] = []
    with _lock:
        _found.append(found)
    try:
        yield found
    finally:
        with _lock:
            _found[:] = [other for other in _found if other is not found]

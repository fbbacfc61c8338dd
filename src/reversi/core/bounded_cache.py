"""`BoundedCache`: a small thread-safe map for facts that never change once read (a run's owner,
a key's principal), so hot paths need not read them from the store again. Pure: no I/O."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A bounded, thread-safe map: past `size` entries, the oldest goes."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

"""Encryption at rest in the store: the `data_keys` table (`DataKeyQueries`) and the `Vault` that seals
values as they are written and opens them as they are read (`reversi.core.envelope`).

Each run's values are sealed under a data key of the run's own, made on its first sealed write and
kept wrapped by the current key-encryption key (KEK). Erasing a run's data keys (`wrapped` set to
NULL) makes its values unreadable everywhere at once, while the journal's structure stays: every read
looks the run's keys up in its own transaction, so no process reads on with a key erased meanwhile.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from reversi.core.bounded_cache import BoundedCache
from reversi.core.envelope import (
    Keyring,
    Unreadable,
    is_sealed,
    new_data_key,
    open_value,
    seal_value,
    sealed_key_id,
    unwrap,
    wrap,
)
from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, LooseJSONObject, compact, loads
from reversi.core.models import utc_now
from reversi.store.sql import fill, load, marks
from reversi.store.statements import Statements

__all__ = ["CLEAR", "SEALED", "SEALED_FIELDS", "DataKeyQueries", "DataKeyRow", "Vault"]

# The fields of an event's data that carry what agents and tools said (arguments, results, errors, what
# was read back or captured), sealed together under `SEALED`; the rest (status, tool, step numbers,
# keys, who) is the journal's structure and stays in clear, so a process without the key still plans.
SEALED_FIELDS = ("args", "result", "error", "arguments", "answer", "mismatch", "before", "before_absent", "capture",
                 "text", "before_text", "title", "action")
SEALED = "sealed"

_KEPT_UNWRAPPED = 4096  # data keys kept unwrapped in memory, by (id, wrapped form)


@dataclass(frozen=True)
class DataKeyRow:
    data_key_id: str
    run_id: str
    kek_id: str
    wrapped: str | None  # None once erased
    created_at: str
    erased_at: str | None


_SQL = load("data_keys.sql")


class DataKeyQueries(Statements):
    """The queries of `data_keys` (`data_keys.sql`)."""

    def data_key(self, data_key_id: str) -> DataKeyRow | None:
        row = self._exec(_SQL["data_key"], (data_key_id,)).fetchone()
        return DataKeyRow(*row) if row else None

    def run_data_keys(self, run_id: str) -> list[DataKeyRow]:
        rows = self._exec(_SQL["run_data_keys"], (run_id,))
        return [DataKeyRow(*r) for r in rows.fetchall()]

    def insert_data_key(self, row: DataKeyRow) -> None:
        self._exec(_SQL["insert_data_key"],
                   (row.data_key_id, row.run_id, row.kek_id, row.wrapped, row.created_at, row.erased_at))

    def data_keys_to_rewrap(self, current: str, limit: int, among: Sequence[str]) -> list[DataKeyRow]:
        """Live data keys wrapped by one of the KEKs `among` (not `current`), oldest first."""
        olds = [k for k in among if k != current]
        if not olds:
            return []
        rows = self._exec(fill(_SQL["data_keys_to_rewrap"], keks=marks(len(olds))), [*olds, limit])
        return [DataKeyRow(*r) for r in rows.fetchall()]

    def rewrap_data_key(self, data_key_id: str, old_kek: str, new_kek: str, wrapped: str) -> int:
        """Put the data key under `new_kek`, if it is still under `old_kek` and not erased."""
        done = self._exec(_SQL["rewrap_data_key"], (new_kek, wrapped, data_key_id, old_kek))
        return len(done.fetchall())

    def erase_data_keys(self, run_ids: Sequence[str], at: str) -> int:
        """Destroy the data keys of these runs; returns how many were live."""
        if not run_ids:
            return 0
        done = self._exec(fill(_SQL["erase_data_keys"], runs=marks(len(run_ids))), (at, *run_ids))
        return len(done.fetchall())

    def count_data_keys(self) -> dict[str, int]:
        """How many live data keys each KEK wraps, and how many were erased (`""`)."""
        rows = self._exec(_SQL["count_data_keys"]).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}


class Vault:
    """Seals and opens values for one store; `keyring` is None when this process holds no KEK (values
    are then written in clear, and sealed ones read as `Unreadable`)."""

    def __init__(self, keyring: Keyring | None = None) -> None:
        self.keyring = keyring
        self._unwrapped: dict[tuple[str, str], bytes] = {}
        self._writing = BoundedCache[str, tuple[str, bytes]](_KEPT_UNWRAPPED)
        self._lock = threading.Lock()

    @property
    def seals(self) -> bool:
        return self.keyring is not None

    def _key(self, row: DataKeyRow) -> bytes | Unreadable:
        if row.wrapped is None:
            return Unreadable(f"its values were erased on {row.erased_at}")
        if self.keyring is None or row.kek_id not in self.keyring.keys:
            return Unreadable(f"encrypted under key {row.kek_id}, which this process does not hold")
        found = self._unwrapped.get((row.data_key_id, row.wrapped))
        if found is None:
            try:
                found = unwrap(self.keyring.keys[row.kek_id], row.wrapped, row.data_key_id, row.run_id)
            except ValueError:
                return Unreadable(f"its data key does not open with key {row.kek_id}")
            with self._lock:
                if len(self._unwrapped) >= _KEPT_UNWRAPPED:
                    self._unwrapped.clear()
                self._unwrapped[(row.data_key_id, row.wrapped)] = found
        return found

    def dump(self, q: DataKeyQueries, run_id: str, place: str, value: JSONView) -> str:
        """`value` as the column stores it: sealed when this process holds a KEK, else JSON."""
        if self.keyring is None:
            return compact(value)
        data_key_id, key = self._write_key(q, run_id)
        return seal_value(key, data_key_id, run_id, place, value)

    def _write_key(self, q: DataKeyQueries, run_id: str) -> tuple[str, bytes]:
        found = self._writing.get(run_id)
        if found is not None:
            return found
        assert self.keyring is not None
        made_here: set[str] = q.__dict__.setdefault("_made_keys", set())
        for row in q.run_data_keys(run_id):
            if row.kek_id == self.keyring.current:
                key = self._key(row)
                if isinstance(key, bytes):
                    if row.data_key_id not in made_here:
                        # committed by an earlier transaction (the run's opening): kept for this process,
                        # and used on even once erased (what is written then is unreadable at once too)
                        self._writing.put(run_id, (row.data_key_id, key))
                    return row.data_key_id, key
        return self.new_run_key(q, run_id)

    def new_run_key(self, q: DataKeyQueries, run_id: str) -> tuple[str, bytes]:
        """Make the run a data key under the current KEK (when a run opens, or the first time a run opened
        in clear is written to with a key); it is not remembered until a later transaction reads it
        committed, so a key rolled back with its transaction is never used again."""
        assert self.keyring is not None
        made, data_key_id, current = new_data_key(), "dk_" + secrets.token_hex(12), self.keyring.current
        wrapped = wrap(self.keyring.keys[current], made, data_key_id, run_id)
        q.insert_data_key(DataKeyRow(data_key_id, run_id, current, wrapped, utc_now(), None))
        q.__dict__.setdefault("_made_keys", set()).add(data_key_id)
        return data_key_id, made

    def dump_event(self, q: DataKeyQueries, run_id: str, data: JSONObjectView) -> str:
        """An event's data as the column stores it: its `SEALED_FIELDS` sealed together when this
        process holds a KEK (their names kept in clear beside them)."""
        if self.keyring is None:
            return compact(data)
        values = {name: data[name] for name in SEALED_FIELDS if name in data}
        if not values:
            return compact(data)
        rest = {k: v for k, v in data.items() if k not in values}
        return compact(rest | {SEALED: {"fields": list(values), "value": self.dump(q, run_id, "event", values)}})

    def load_event(self, q: DataKeyQueries, run_id: str, stored: str) -> Mapping[str, LooseJSON]:
        """An event's data from the column; its sealed fields are opened when first read (each
        `Unreadable` if they cannot be), so a plan that needs only the statuses decrypts no argument."""
        data: LooseJSONObject = loads(stored)
        sealed = data.pop(SEALED, None)
        if sealed is None:
            return data
        if not isinstance(sealed, dict) or not is_sealed(sealed.get("value")):  # not ours: kept as it is
            data[SEALED] = sealed
            return data
        fields = tuple(map(str, sealed.get("fields", ())))
        value = sealed["value"]
        key = self._read_key(q, run_id, value)
        if type(key) is not bytes:
            return data | dict.fromkeys(fields, key)
        return _SealedData(data, fields, partial(_opened, key, value, run_id))

    def _read_key(self, q: DataKeyQueries, run_id: str, stored: str) -> bytes | Unreadable:
        memo: dict[str, DataKeyRow | None] = q.__dict__.setdefault("_read_keys", {})
        data_key_id = sealed_key_id(stored)
        if data_key_id in memo:
            row = memo[data_key_id]
        else:
            row = memo[data_key_id] = q.data_key(data_key_id)
        if row is None or row.run_id != run_id:
            return Unreadable("its data key is not in this store")
        return self._key(row)

    def load(self, q: DataKeyQueries, run_id: str, place: str, stored: str) -> LooseJSON:
        """The value a column holds: JSON as it is, a sealed value opened (or `Unreadable`)."""
        if not is_sealed(stored):
            return loads(stored)
        key = self._read_key(q, run_id, stored)
        return key if isinstance(key, Unreadable) else _opened(key, stored, run_id, place)


def _opened(key: bytes, stored: str, run_id: str, place: str = "event") -> LooseJSON:
    try:
        return open_value(key, stored, run_id, place)
    except ValueError:
        return Unreadable("it does not open: it was moved or damaged")


class _SealedData(Mapping[str, LooseJSON]):
    """An event's data whose sealed fields are opened on first use (the key was read in its transaction)."""

    def __init__(self, clear: LooseJSONObject, fields: tuple[str, ...], opener: Callable[[], LooseJSON]) -> None:
        self._clear, self._fields, self._opener = clear, fields, opener
        self._all: LooseJSONObject | None = None

    def _open(self) -> LooseJSONObject:
        if self._all is None:
            opened = self._opener()
            values = opened if isinstance(opened, dict) else dict.fromkeys(self._fields, opened)
            self._all = self._clear | values
        return self._all

    def __getitem__(self, key: str) -> LooseJSON:
        if key in self._fields:
            return self._open()[key]
        return self._clear[key]

    def __contains__(self, key: object) -> bool:
        return key in self._clear or key in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._open())

    def __len__(self) -> int:
        return len(self._clear) + len(self._fields)

    def __eq__(self, other: object) -> bool:
        return dict(self._open()) == other if isinstance(other, Mapping) else NotImplemented

    def __repr__(self) -> str:
        return repr(self._open())

CLEAR = Vault()  # for a store opened without a keyring: writes in clear, reads say why sealed values are not

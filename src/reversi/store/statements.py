"""What every query of the store stands on: the back end's cursor and dialect, in one transaction.

Each query module reads its statements from the `.sql` file beside it (`sql.py`); this one's,
`statements.sql`, holds the parts other statements are formed with: the row locks (`guarded`)
and the optional `LIMIT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from reversi.errors import BadInput
from reversi.store import loop_watch
from reversi.store.sql import fill, load

if TYPE_CHECKING:
    from reversi.store.data_keys import Vault


class Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Dialect(Protocol):
    # Whether writers of a run must lock its row (PostgreSQL); SQLite's BEGIN IMMEDIATE already
    # serialises every writer of the file.
    row_locks: bool
    # An SQL expression: the store's clock, in seconds since the epoch (leases are timed by it).
    now_s: str
    # How this store keeps values: sealed under its data keys, or in clear (`Store.use_keyring`).
    vault: Vault

    def sql(self, text: str) -> str:
        """The statement with `?` placeholders turned into the driver's own."""

    def lock_run(self, cur: Cursor, run_id: str) -> None:
        """Serialise writers of one run until the transaction ends."""

    def lock_name(self, cur: Cursor, name: str) -> None:
        """Serialise writers that share `name` (a duplicate key, the halt stream) until the end."""


CHUNK = 500  # ids per `IN (...)`: well under every back end's limit of parameters
_SQL = load("statements.sql")
LIMIT = _SQL["limit"]  # for a statement's slot {limit}, with `sql.optional`


@dataclass(frozen=True)
class Guarded:
    """A statement in the form each way of locking runs it (see `guarded`)."""

    plain: str  # where writers take no row locks
    row_locked: str  # where they do: {for_update} filled
    run_locked: str  # and the run's row lock taken first, in the same statement


def guarded(text: str, **slots: str) -> Guarded:
    """`text` (with its other `slots` filled) in each form: its slots {run_guard} and {run_guarded}
    hold the run's row lock (`Statements._guarded`), {for_update}, if it has one, the lock of the rows
    it reads; each is left empty where the back end takes no row locks."""
    lock = _SQL["for_update"]
    return Guarded(
        fill(text, run_guard="", run_guarded="", for_update="", **slots),
        fill(text, run_guard="", run_guarded="", for_update=lock, **slots),
        fill(text, run_guard=_SQL["run_guard"], run_guarded=_SQL["run_guarded"], for_update=lock, **slots),
    )


def _too_large(params: Sequence[Any]) -> str:
    big = [p for p in params if isinstance(p, int) and not isinstance(p, bool) and not -(2**63) <= p < 2**63]
    return str(big[0]) if big else "past 64 bits"


class Statements:
    """One transaction's statements: portable SQL with `?` placeholders, checked values, the locks.

    The store's query classes (runs and steps, approvals, halts, jobs, keys, sessions) build on it,
    and `Queries` is all of them at once.
    """

    def __init__(self, cur: Cursor, dialect: Dialect) -> None:
        loop_watch.check()
        self._cur = cur
        self._dialect = dialect

    @property
    def vault(self) -> Vault:
        """What seals values as they are written and opens them as they are read (`data_keys`)."""
        return self._dialect.vault

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        for p in params:  # a loop, not any(): this runs for every statement
            if type(p) is str and "\x00" in p:  # PostgreSQL's text cannot hold it; keep both alike
                raise BadInput("text with a NUL character (\\x00) cannot be stored")
        try:
            self._cur.execute(self._dialect.sql(sql), params)
        except UnicodeEncodeError as exc:  # a lone surrogate (from a "\ud800" escape) has no UTF-8 form
            raise BadInput(f"text that is not valid Unicode cannot be stored: {exc.reason} "
                           f"({exc.object[exc.start:exc.end]!r})") from None
        except OverflowError:  # SQLite's integers are 64-bit (a step number from a typo, say)
            raise BadInput(f"a number is too large: {_too_large(params)}") from None
        return self._cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one portable statement (`?` placeholders) in this transaction (savepoints, and tests)."""
        return self._exec(sql, params)

    # -- locks ---------------------------------------------------------------------------------

    def lock_run(self, run_id: str) -> None:
        self._dialect.lock_run(self._cur, run_id)

    def lock_name(self, name: str) -> None:
        self._dialect.lock_name(self._cur, name)

    def _guarded(self, statement: Guarded, run_id: str | None) -> tuple[str, tuple[str, ...]]:
        """The form of `statement` this back end runs, and the parameters of its run lock, which
        come first: with `run_id`, it also takes that run's write lock (`lock_run()`) within the
        same statement, saving a round trip on the journal's hot path."""
        if not self._dialect.row_locks:
            return statement.plain, ()
        if run_id is None:
            return statement.row_locked, ()
        return statement.run_locked, (run_id,)

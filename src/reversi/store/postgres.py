"""The shared back end: PostgreSQL through psycopg 3, for many processes on many machines.

Its own statements (sessions, locks, transactions, the clock) are in `postgres.sql`.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import psycopg.errors
from psycopg.pq import TransactionStatus
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from reversi.errors import StoreUnavailable, WriteConflict
from reversi.store.base import Store
from reversi.store.data_keys import CLEAR
from reversi.store.group_commit import GroupCommit
from reversi.store.leases import ProcessLock
from reversi.store.queries import Queries
from reversi.store.schema import migrate
from reversi.store.sql import fill, load
from reversi.store.statements import Cursor, Dialect

_DEAD_HOLDER_GRACE_S = (0.02, 0.05, 0.1, 0)
IDLE_IN_TRANSACTION_MS = 15_000
READERS = 4  # connections for reads beside the writer's, at most, per store


def _placeholders(text: str) -> str:
    """A statement's `?` placeholders as psycopg writes them."""
    return text.replace("?", "%s")


_SQL = load("postgres.sql")
_LOCK_RUN = _placeholders(_SQL["lock_run"])
_LOCK_KEY = _placeholders(_SQL["lock_key"])
_TRY_PROCESS_LOCK = _placeholders(_SQL["try_process_lock"])
_PROCESS_UNLOCK = _placeholders(_SQL["process_unlock"])
# as bytes, which psycopg sends as they are: every transaction runs them
_BEGIN, _COMMIT, _ROLLBACK = _SQL["begin"].encode(), _SQL["commit"].encode(), _SQL["rollback"].encode()


def _lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for a name (schema-qualified, so test schemas don't collide)."""
    digest = hashlib.sha256(":".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _PostgresDialect:
    row_locks = True
    now_s = _SQL["now_s"]

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.vault = CLEAR

    def sql(self, text: str) -> str:
        return _placeholders(text)

    def lock_run(self, cur: Cursor, run_id: str) -> None:
        cur.execute(_LOCK_RUN, (run_id,))

    def lock_name(self, cur: Cursor, name: str) -> None:
        cur.execute(_LOCK_KEY, (_lock_key(self.schema, "name", name),))


@retry(
    retry=retry_if_exception_type(psycopg.OperationalError),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.1, max=1),
    reraise=True,
)
def _connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    # Our transactions never wait on anything but the database: one left open for long belongs to a
    # process that was stopped (SIGSTOP) or hung mid-write. The server ends that session, so the row
    # locks it holds stop holding up every other writer of those runs.
    conn.execute(fill(_SQL["idle_timeout"], ms=str(IDLE_IN_TRANSACTION_MS)))
    return conn


def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection, retried briefly.

    Raises:
        StoreUnavailable: the server could not be reached, or the URL cannot be read.
    """
    try:
        return _connect(url)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"cannot reach the store at {_redact(url)}: {exc}".strip()) from exc
    except psycopg.Error:  # a URL libpq cannot parse; its message would quote the URL, password and all
        raise StoreUnavailable(f"cannot use the store URL {_redact(url)}: it is not a valid PostgreSQL URL") from None


def _unavailable(url: str, exc: psycopg.OperationalError) -> StoreUnavailable:
    return StoreUnavailable(f"the store at {_redact(url)} failed: {exc}")


def _redact(url: str) -> str:
    """The URL without a password."""
    if "@" not in url:
        return url
    head, tail = url.split("@", 1)
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':', 1)[0]}@{tail}"


class _AdvisoryLocks:
    """The process locks of this store's rollback leases: session advisory locks, all on one connection
    of their own, which lives as long as the process (or until the server drops it).

    A session may take an advisory lock it already holds, so the keys held here are also kept in a set:
    one holder per key in this process too.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._mutex = threading.Lock()
        self._held: set[int] = set()

    def try_lock(self, key: int) -> bool:
        with self._mutex:
            if key in self._held:
                return False
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = connect(self.url)
                self._held.clear()  # a new session holds nothing
            try:
                row = self._conn.execute(_TRY_PROCESS_LOCK, (key,)).fetchone()
            except psycopg.OperationalError as exc:
                raise _unavailable(self.url, exc) from exc
            if row and row[0]:
                self._held.add(key)
                return True
            return False

    def unlock(self, key: int) -> None:
        with self._mutex:
            if key not in self._held or self._conn is None:
                return
            self._held.discard(key)
            with contextlib.suppress(psycopg.Error):  # a dropped session has let go of it already
                self._conn.execute(_PROCESS_UNLOCK, (key,))

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
            self._held.clear()


class _AdvisoryLock(ProcessLock):
    def __init__(self, locks: _AdvisoryLocks, key: int) -> None:
        self._locks: _AdvisoryLocks | None = locks
        self._key = key

    def release(self) -> None:
        if self._locks is not None:
            self._locks.unlock(self._key)
            self._locks = None


def _failed(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    return conn.info.transaction_status == TransactionStatus.INERROR


class _Session:
    """A connection that one thread at a time runs transactions on; reopened when the server dropped it."""

    def __init__(self, url: str, dialect: _PostgresDialect,
                 conn: psycopg.Connection[tuple[object, ...]] | None = None) -> None:
        self.url = url
        self.dialect = dialect
        self.conn = conn or connect(url)
        self.mutex = threading.RLock()

    @contextmanager
    def transaction(self, begin: bytes = _BEGIN) -> Iterator[Queries]:
        with self.mutex:
            yield from self.transaction_held(begin)

    def transaction_held(self, begin: bytes = _BEGIN) -> Iterator[Queries]:
        """`transaction` for a caller that holds `mutex` already (a generator to `yield from`). `begin`
        opens it: it may carry more statements, without parameters, in the same round trip. Inside a
        transaction of this thread's (a read within a write) it is a savepoint of that one."""
        self._reopen_if_dropped()
        try:
            if self.conn.info.transaction_status != TransactionStatus.IDLE:
                with self.conn.transaction():
                    yield Queries(self.conn.cursor(), self.dialect)
                return
            cur = self.conn.cursor()
            cur.execute(begin)
            try:
                yield Queries(cur, self.dialect)
            except BaseException:
                if not self.conn.broken:
                    cur.execute(_ROLLBACK)
                raise
            if _failed(self.conn):  # a statement failed and its error was swallowed: nothing would be committed
                cur.execute(_ROLLBACK)
                raise StoreUnavailable(f"the store at {_redact(self.url)} failed a write: it was rolled back")
            cur.execute(_COMMIT)
        except psycopg.errors.DeadlockDetected as exc:
            raise WriteConflict(f"the store at {_redact(self.url)} undid a write to break a deadlock") from exc
        except psycopg.errors.IdleInTransactionSessionTimeout as exc:
            raise StoreUnavailable(f"the store at {_redact(self.url)} ended a transaction of this process left "
                                   f"idle over {IDLE_IN_TRANSACTION_MS // 1000} s: nothing of it was kept") from exc
        except psycopg.OperationalError as exc:
            raise _unavailable(self.url, exc) from exc

    def read_held(self) -> Iterator[Queries]:
        """A read for a caller that holds `mutex`: each statement on its own, with no BEGIN or COMMIT
        around them, two round trips fewer. At READ COMMITTED (PostgreSQL's default) a transaction gives
        its statements no common snapshot either, and a read takes no locks to hold. Inside a write of
        this thread's it is part of that write."""
        self._reopen_if_dropped()
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            yield from self.transaction_held()
            return
        try:
            yield Queries(self.conn.cursor(), self.dialect)
        except psycopg.OperationalError as exc:
            raise _unavailable(self.url, exc) from exc

    def _reopen_if_dropped(self) -> None:
        if self.conn.closed or self.conn.broken:
            self.conn = connect(self.url)  # the server restarted, or the network dropped us

    def close(self) -> None:
        with self.mutex:
            self.conn.close()


class _Readers:
    """Up to `READERS` more connections for reads, opened as concurrent reads need them."""

    def __init__(self, url: str, dialect: _PostgresDialect) -> None:
        self.url, self.dialect = url, dialect
        self._free: list[_Session] = []
        self._opened = 0
        self._changed = threading.Condition()

    @contextmanager
    def session(self) -> Iterator[_Session]:
        """A reader session, held (its mutex taken) until the block ends."""
        with self._changed:
            while not self._free and self._opened >= READERS:
                self._changed.wait()
            found = self._free.pop() if self._free else None
            if found is None:
                self._opened += 1
        try:
            found = found or _Session(self.url, self.dialect)
        except BaseException:
            with self._changed:
                self._opened -= 1
                self._changed.notify()
            raise
        try:
            with found.mutex:
                yield found
        finally:
            with self._changed:
                self._free.append(found)
                self._changed.notify()

    def close(self) -> None:
        with self._changed:
            for session in self._free:
                session.close()
            self._free.clear()


class PostgresStore(Store):
    """A PostgreSQL database (the schema in `search_path`); the process lock of each rollback lease is a
    session advisory lock."""

    # Two processes' batches can lock the same runs in opposite orders; PostgreSQL then undoes one.
    _retryable = (psycopg.errors.DeadlockDetected,)

    def __init__(self, url: str) -> None:
        self.url = url
        conn = connect(url)
        row = conn.execute(_SQL["current_schema"]).fetchone()
        self._schema = str(row[0]) if row else "public"
        self._dialect = _PostgresDialect(self._schema)
        self._writer = _Session(url, self._dialect, conn)
        self._readers = _Readers(url, self._dialect)
        self._locks = _AdvisoryLocks(url)
        key = _lock_key(self._schema, "name", "system_events")  # `lock_name`'s, which adds and lifts halts
        self._begin_holding_halts = fill(_SQL["begin_holding_halts"], key=str(key)).encode()
        self._group_commit = GroupCommit(self.write, begin_halts=self.write_holding_halts)
        self._migrate()

    def _migrate(self) -> None:
        conn = self._writer.conn
        with self._writer.mutex, conn.transaction():
            cur = conn.cursor()
            # The migration lock: an advisory lock of this schema's, let go of at the commit.
            cur.execute(_LOCK_KEY, (_lock_key(self._schema, "migrations"),))
            migrate(cur, "postgresql", self._dialect.sql)

    @contextmanager
    def read(self) -> Iterator[Queries]:
        # On the writer's connection when it is free (or this thread is inside a write); else on one
        # of a few more, so that reads wait neither for a batch of writes to commit nor for each other.
        with self._group_commit.settled():
            if self._writer.mutex.acquire(blocking=False):
                try:
                    yield from self._writer.read_held()
                finally:
                    self._writer.mutex.release()
                return
            with self._readers.session() as session:
                yield from session.read_held()

    @contextmanager
    def write(self) -> Iterator[Queries]:
        with self._group_commit.settled(), self._writer.transaction() as q:
            yield q

    @contextmanager
    def write_holding_halts(self) -> Iterator[Queries]:
        # In the round trip of the BEGIN: a statement begun after the lock sees a halt committed before it.
        with self._group_commit.settled(), self._writer.transaction(self._begin_holding_halts) as q:
            yield q

    def process_lock(self, run_id: str, token: int, *, dead_holder_grace: bool = False) -> ProcessLock | None:
        key = _lock_key(self._schema, "run", run_id, str(token))
        # A holder that died holds on until the server has ended its backend, a few milliseconds
        # after the connection dropped: look again briefly before calling it alive.
        for delay in _DEAD_HOLDER_GRACE_S if dead_holder_grace else (0,):
            if self._locks.try_lock(key):
                return _AdvisoryLock(self._locks, key)
            time.sleep(delay)
        return None

    def _dialect_of(self) -> Dialect:
        return self._dialect

    def close(self) -> None:
        self._writer.close()
        self._readers.close()
        self._locks.close()

"""The embedded back end: one SQLite file in WAL mode, writers serialised by `BEGIN IMMEDIATE`.

Its own statements (the clock, the pragmas, the transactions) are in `sqlite.sql`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tenacity import retry, retry_if_exception, stop_after_delay, wait_random

from reversi.errors import StoreUnavailable
from reversi.private_files import FILE_MODE, make_private_folders, private_file
from reversi.store.base import Store
from reversi.store.data_keys import CLEAR
from reversi.store.group_commit import GroupCommit
from reversi.store.leases import ProcessLock
from reversi.store.queries import Queries
from reversi.store.schema import migrate
from reversi.store.sql import fill, load
from reversi.store.statements import Cursor, Dialect

BUSY_TIMEOUT_MS = 10_000
_SQL = load("sqlite.sql")
_PRAGMAS = (fill(_SQL["busy_timeout"], ms=str(BUSY_TIMEOUT_MS)), _SQL["journal_mode"], _SQL["synchronous"])
_BEGIN_READ, _BEGIN_WRITE = _SQL["begin_read"], _SQL["begin_write"]
# Result codes after which the open file may be gone for good (see `SQLiteStore._noting_lost_file`).
_LOST_FILE = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


class _SQLiteDialect:
    row_locks = False
    now_s = _SQL["now_s"]

    def __init__(self) -> None:
        self.vault = CLEAR

    def sql(self, text: str) -> str:
        return text

    # BEGIN IMMEDIATE already serialises every writer of the file.
    def lock_run(self, cur: Cursor, run_id: str) -> None:
        return None

    def lock_name(self, cur: Cursor, name: str) -> None:
        return None


class _FileLock(ProcessLock):
    """An flock on a file of its own per fencing token; whoever lets go of it removes the file (a token
    is never claimed twice, so nobody needs the file after)."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self._path = path

    def release(self) -> None:
        if self._fd is not None:
            # while still locked: nobody can have taken it meanwhile; a disk that turned read-only leaves
            # the file behind, which is harmless (a token is never claimed twice)
            with contextlib.suppress(OSError):
                self._path.unlink(missing_ok=True)
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _busy(exc: BaseException) -> bool:
    """Another connection holds the file (worth waiting for), as opposed to a file that cannot be opened."""
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF in (
        sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@retry(retry=retry_if_exception(_busy), stop=stop_after_delay(BUSY_TIMEOUT_MS / 1000), wait=wait_random(0.01, 0.1),
       reraise=True)
def _open_wal(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode. Switching a new file to WAL is refused, not waited for, while
    another process is doing the same: several processes opening a fresh store try again."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        for pragma in _PRAGMAS:
            conn.execute(pragma)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class SQLiteStore(Store):
    """A SQLite file; the process lock of each rollback lease is an OS file lock beside it.

    Every read and write goes through one connection, which waits for the file's write lock; an
    event loop's writes reach it through the group commit's writer thread, never from the loop.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = Path(url.removeprefix("sqlite:///"))
        try:
            if self.path.is_dir():
                raise StoreUnavailable(f"cannot open the store at {self.path}: it is a directory, not a database file")
            make_private_folders(self.path.parent)
            # SQLite gives the -wal and -shm files the mode of the database file
            private_file(self.path)
            self._conn = _open_wal(self.path)
        except (OSError, sqlite3.Error) as exc:
            said = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise StoreUnavailable(f"cannot open the store at {self.path}: {said}") from exc
        self._mutex = threading.RLock()
        self._reopen_needed = False
        self._dialect = _SQLiteDialect()
        self._group_commit = GroupCommit(self.write)
        try:
            self._migrate()
        except BaseException as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(f"cannot open the store at {self.path}: {exc}") from exc
            raise

    def _migrate(self) -> None:
        # BEGIN IMMEDIATE is the migration lock: it holds off every other writer of the file.
        with self._transaction(_BEGIN_WRITE) as cur:
            migrate(cur, "sqlite", self._dialect.sql)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Cursor]:
        """A transaction opened by `begin` on the connection that waits for the file."""
        with self._mutex:
            reopened = self._reopen_needed
            if reopened:
                self._reopen()
            with self._noting_lost_file(), _in_transaction(self._conn, begin, self.path) as cur:
                yield cur
            # A read works on a disk the kernel made read-only: only a write that commits shows the file
            # is back for good (until then each transaction opens it again, so a repaired disk mounted
            # anew is found by the first write after it, not the second).
            if reopened and begin != _BEGIN_READ:
                self._reopen_needed = False

    @contextmanager
    def _noting_lost_file(self) -> Iterator[None]:
        """Note an error after which the open file may be gone for good, so the next transaction opens
        it again: a disk the kernel made read-only, repaired and mounted again, holds the store in a
        new file system, which connections opened before never see."""
        try:
            yield
        except StoreUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, sqlite3.Error) and (cause.sqlite_errorcode & 0xFF) in _LOST_FILE:
                self._reopen_needed = True
            raise

    def _reopen(self) -> None:
        """The connection opened anew, as a process starting now would open it (`_mutex` held).

        Raises:
            StoreUnavailable: the file cannot be opened (yet).
        """
        try:
            conn = _open_wal(self.path)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the store at {self.path}: {exc}") from exc
        self._conn.close()
        self._conn = conn

    @contextmanager
    def read(self) -> Iterator[Queries]:
        with self._group_commit.settled(), self._transaction(_BEGIN_READ) as cur:
            yield Queries(cur, self._dialect)

    @contextmanager
    def write(self) -> Iterator[Queries]:
        with self._group_commit.settled(), self._transaction(_BEGIN_WRITE) as cur:
            yield Queries(cur, self._dialect)

    def lock_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".locks")

    def process_lock(self, run_id: str, token: int, *, dead_holder_grace: bool = False) -> ProcessLock | None:
        """Raises StoreUnavailable: the lock file cannot be made (a full or read-only disk)."""
        # The kernel drops a dead process's flocks as it ends it: no grace is needed.
        directory = self.lock_dir()
        path = directory / f"{run_id}.{token}.lock"
        try:
            make_private_folders(directory)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise StoreUnavailable(f"cannot make the rollback lock {path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return _FileLock(fd, path)

    def _dialect_of(self) -> Dialect:
        return self._dialect

    def close(self) -> None:
        with self._mutex:
            self._conn.close()


@contextmanager
def _in_transaction(conn: sqlite3.Connection, begin: str, path: Path) -> Iterator[sqlite3.Cursor]:
    """Yield a cursor inside a transaction opened by `begin`, committed after, rolled back on error."""
    cur = conn.cursor()
    try:
        cur.execute(begin)
    except sqlite3.OperationalError as exc:
        raise _unavailable(path, exc) from exc
    try:
        yield cur
    except sqlite3.OperationalError as exc:  # a full or failing disk, met before the commit
        _roll_back(conn)
        raise _unavailable(path, exc) from exc
    except BaseException:
        _roll_back(conn)
        raise
    try:
        cur.execute(_SQL["commit"])
    except sqlite3.OperationalError as exc:
        _roll_back(conn)
        raise StoreUnavailable(f"cannot commit to the store at {path}: {exc}") from exc


def _unavailable(path: Path, exc: sqlite3.OperationalError) -> StoreUnavailable:
    if _busy(exc):
        return StoreUnavailable(f"the store at {path} is locked: {exc}")
    return StoreUnavailable(f"the store at {path} failed: {exc}")


def _roll_back(conn: sqlite3.Connection) -> None:
    """Abandon the transaction; on a failing disk, SQLite may already have (or fail to), and either way
    the error to report is the one that got us here."""
    with contextlib.suppress(sqlite3.Error):
        conn.rollback()

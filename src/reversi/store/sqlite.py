"""The embedded back end: one SQLite file in WAL mode, writers serialised by `BEGIN IMMEDIATE`."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_random

from reversi.errors import StoreUnavailable
from reversi.store.base import RunLock, Store, migrations, statements
from reversi.store.group_commit import GroupCommit, WouldWait
from reversi.store.queries import Cursor, Queries

BUSY_TIMEOUT_MS = 10_000


class _SQLiteDialect:
    row_locks = False

    def sql(self, text: str) -> str:
        return text

    # BEGIN IMMEDIATE already serialises every writer of the file.
    def lock_run(self, cur: Cursor, run_id: str) -> None:
        return None

    def lock_name(self, cur: Cursor, name: str) -> None:
        return None


class _FileLock(RunLock):
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


@retry(retry=retry_if_exception_type(sqlite3.OperationalError), stop=stop_after_delay(BUSY_TIMEOUT_MS / 1000),
       wait=wait_random(0.01, 0.1), reraise=True)
def _open_wal(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode. Switching a new file to WAL is refused, not waited for, while
    another process is doing the same: several processes opening a fresh store try again."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class SQLiteStore(Store):
    """A SQLite file; the rollback lock of each run is an OS file lock beside it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = Path(url.removeprefix("sqlite:///"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = _open_wal(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"cannot open the store at {self.path}: {exc}") from exc
        self._mutex = threading.RLock()
        self._dialect = _SQLiteDialect()
        self._group_commit = GroupCommit(self.write, self._write_now)
        self._migrate()

    def _migrate(self) -> None:
        with self._transaction("BEGIN IMMEDIATE") as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            done = {row[0] for row in cur.execute("SELECT version FROM schema_migrations")}
            for version, script in migrations():
                if version in done:
                    continue
                for statement in statements(script):
                    cur.execute(statement)
                cur.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))

    @contextmanager
    def _transaction(self, begin: str, *, wait: bool = True) -> Iterator[sqlite3.Cursor]:
        """A transaction opened by `begin`; without `wait`, WouldWait instead of waiting for the
        connection (another thread) or the file's write lock (another process)."""
        if not self._mutex.acquire(blocking=wait):
            raise WouldWait()
        try:
            cur = self._conn.cursor()
            try:
                if wait:
                    cur.execute(begin)
                else:
                    self._begin_without_waiting(cur, begin)
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"the store at {self.path} is locked: {exc}") from exc
            try:
                yield cur
            except BaseException:
                self._conn.rollback()
                raise
            try:
                cur.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                self._conn.rollback()
                raise StoreUnavailable(f"cannot commit to the store at {self.path}: {exc}") from exc
        finally:
            self._mutex.release()

    @staticmethod
    def _begin_without_waiting(cur: sqlite3.Cursor, begin: str) -> None:
        cur.execute("PRAGMA busy_timeout = 0")
        try:
            cur.execute(begin)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                raise WouldWait() from exc
            raise
        finally:
            cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    @contextmanager
    def read(self) -> Iterator[Queries]:
        with self._transaction("BEGIN") as cur:
            yield Queries(cur, self._dialect)

    @contextmanager
    def write(self) -> Iterator[Queries]:
        with self._transaction("BEGIN IMMEDIATE") as cur:
            yield Queries(cur, self._dialect)

    @contextmanager
    def _write_now(self) -> Iterator[Queries]:
        """`write`, or WouldWait at once if another thread or process is using the store."""
        with self._transaction("BEGIN IMMEDIATE", wait=False) as cur:
            yield Queries(cur, self._dialect)

    def lock_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".locks")

    def try_lock_run(self, run_id: str) -> RunLock | None:
        directory = self.lock_dir()
        directory.mkdir(exist_ok=True)
        fd = os.open(directory / f"{run_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return _FileLock(fd)

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

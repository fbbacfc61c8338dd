"""The databases the sql connector acts on: SQLite and PostgreSQL behind one tiny interface.

Table and column names that come from arguments reach SQL only after they were found in the live
schema, and then only quoted; every value travels as a parameter. Rows come back as JSON values
(bytes as `{"$base64": ...}`, decimals, times and UUIDs as text) so before- and after-images can
be kept, compared and digested alike.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.types.json import Jsonb

from reversi.connectors._base import Setting
from reversi.errors import BadArgument, ConnectorError

__all__ = ["SQL_URL", "Database", "Row", "Table", "open_database", "redact"]

SQL_URL = Setting("REVERSI_SQL_URL", "the database when a call leaves out `db`", "none")

Row = dict[str, Any]


def redact(url: str) -> str:
    """The URL without its password (in the authority or as a `password` query parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def encode(value: Any) -> Any:
    """A column's value as JSON."""
    if value is None or isinstance(value, bool | int | float | str | dict | list):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$base64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID | datetime.timedelta):
        return str(value)
    return str(value)


@dataclass(frozen=True)
class Table:
    """A table as the live schema has it: its quoted name, its columns and its primary key."""

    name: str
    sql_name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]

    def quoted(self, names: Sequence[str], argument: str) -> list[str]:
        """The names, quoted, after checking each is a column of this table."""
        for name in names:
            if name not in self.columns:
                raise BadArgument(argument, f"{self.name} has no column {name!r}")
            if "?" in name:  # the placeholder; no name with one reaches SQL
                raise BadArgument(argument, f"column names with a question mark are not supported: {name!r}")
        return [_quote(name) for name in names]

    def key_of(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {column: row[column] for column in self.key}

    def where(self, key: Mapping[str, Any], argument: str = "key") -> tuple[str, list[Any]]:
        """`"a" = ? AND "b" = ?` and its parameters, for a key naming exactly the primary key's columns."""
        if not isinstance(key, Mapping) or set(key) != set(self.key):
            raise BadArgument(argument, f"expected the primary key of {self.name}: {', '.join(self.key)}")
        return " AND ".join(f"{q} = ?" for q in self.quoted(self.key, argument)), [key[c] for c in self.key]


class Database:
    """One open connection; `kind` is `sqlite` or `postgresql`; `url` is the URL without a password."""

    def __init__(self, kind: str, url: str, conn: Any) -> None:
        self.kind, self.url, self._conn = kind, url, conn

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.kind == "sqlite":
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        else:
            with self._conn.transaction():
                yield

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement (`?` placeholders); the rows it returns, as JSON values."""
        if self.kind == "postgresql":
            sql = sql.replace("%", "%%").replace("?", "%s")
        cursor = self._conn.execute(sql, [self._parameter(p) for p in params])
        if cursor.description is None:
            return []
        names = [d[0] for d in cursor.description]
        return [{n: encode(v) for n, v in zip(names, row, strict=True)} for row in cursor.fetchall()]

    def table(self, name: str) -> Table:
        """The table called `name` (exactly), as the live schema has it.

        Raises:
            BadArgument: no such table, or it has no primary key.
        """
        found = self._sqlite_table(name) if self.kind == "sqlite" else self._postgres_table(name)
        if found is None or "?" in name:
            raise BadArgument("table", f"no table {name!r} in {self.url}")
        if not found.key:
            raise BadArgument("table", f"{name} has no primary key: rows cannot be named to undo them")
        return found

    def _sqlite_table(self, name: str) -> Table | None:
        if not self.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", [name]):
            return None
        info = self.rows("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", [name])
        key = tuple(r["name"] for r in sorted((r for r in info if r["pk"]), key=lambda r: int(r["pk"])))
        return Table(name, _quote(name), tuple(r["name"] for r in info), key)

    def _postgres_table(self, name: str) -> Table | None:
        schemas = self.rows(
            "SELECT t.table_schema AS s FROM information_schema.tables t WHERE t.table_name = ?"
            " AND t.table_schema = ANY(current_schemas(false))"
            " ORDER BY array_position(current_schemas(false), t.table_schema::name) LIMIT 1", [name])
        if not schemas:
            return None
        schema = schemas[0]["s"]
        columns = self.rows("SELECT column_name AS c FROM information_schema.columns WHERE table_schema = ?"
                            " AND table_name = ? ORDER BY ordinal_position", [schema, name])
        key = self.rows(
            "SELECT k.column_name AS c FROM information_schema.table_constraints t"
            " JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name"
            " AND k.table_schema = t.table_schema AND k.table_name = t.table_name"
            " WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = ? AND t.table_name = ?"
            " ORDER BY k.ordinal_position", [schema, name])
        return Table(name, f"{_quote(schema)}.{_quote(name)}", tuple(r["c"] for r in columns),
                     tuple(r["c"] for r in key))

    def _parameter(self, value: Any) -> Any:
        if isinstance(value, Mapping) and set(value) == {"$base64"}:
            return base64.b64decode(str(value["$base64"]))
        if isinstance(value, dict | list):
            return Jsonb(value) if self.kind == "postgresql" else json.dumps(value)
        return value

    @property
    def for_update(self) -> str:
        return " FOR UPDATE" if self.kind == "postgresql" else ""


def _with_password(url: str) -> str:
    """`url`, or REVERSI_SQL_URL when that is the same database with the password a result leaves out."""
    configured = os.environ.get(SQL_URL.name)
    return configured if configured and redact(configured) == url and url != configured else url


def open_database(db: str | None) -> Database:
    """Connect to the database `db` names (REVERSI_SQL_URL when None).

    Raises:
        BadArgument: no URL, an unsupported one, or no SQLite file there.
        ConnectorError: the database cannot be reached.
    """
    url = db or os.environ.get(SQL_URL.name)
    if not url:
        raise BadArgument("db", f"required (or set {SQL_URL.name})")
    if url.startswith("sqlite:///"):
        path = Path(os.path.abspath(url.removeprefix("sqlite:///")))
        if not path.is_file():
            raise BadArgument("db", f"no SQLite database at {path}")
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        return Database("sqlite", f"sqlite:///{path}", conn)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            pg = psycopg.connect(_with_password(url), autocommit=True)
        except psycopg.Error as exc:
            raise ConnectorError(f"cannot connect to {redact(url)}: {str(exc).strip()}") from exc
        return Database("postgresql", redact(url), pg)
    raise BadArgument("db", f"unsupported URL {redact(url)!r}: use sqlite:///PATH or postgresql://...")

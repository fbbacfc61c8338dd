"""The databases the sql connector acts on: SQLite and PostgreSQL behind one tiny interface.

The operator names them (`REVERSI_SQL_DATABASES`, `REVERSI_SQL_URL` for the one called `default`);
an agent picks one by name, never by URL, so it reaches no database, host or port it was not given,
and never Reversi's own store (refused by its tables, or when it is `REVERSI_DB`, even if named).
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
import re
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from reversi.connectors._base import Setting
from reversi.core.json_values import JSON, JSONObject, JSONView, LooseJSON, LooseJSONObject
from reversi.errors import BadArgument, ConfigError, ConnectorError

__all__ = ["SQL_DATABASES", "SQL_URL", "Database", "Row", "Table", "configured", "open_database"]

SQL_DATABASES = Setting("REVERSI_SQL_DATABASES",
                        "the databases an agent may name: NAME=URL entries separated by spaces", "none")
SQL_URL = Setting("REVERSI_SQL_URL", "the database named default (the one a call without `db` acts on)", "none")
DEFAULT = "default"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
# Columns only Reversi's store has (migrations 0001 and 0002): a database with one is Reversi's own.
_STORE_MARKS = (("steps", "compensation_needs_approval"), ("api_keys", "secret_sha256"))

Row = LooseJSONObject  # a row, each column's value as JSON (`encode`)
_CONNECT_TIMEOUT_S = 10  # unless the URL says otherwise (`connect_timeout=`)


def configured() -> dict[str, str]:
    """The databases the operator configured, name -> URL; the default first.

    `REVERSI_SQL_URL` is the database named `default`; `REVERSI_SQL_DATABASES` adds `NAME=URL` entries
    (separated by spaces or new lines; a URL has none of its own). The default is the one named
    `default`, else the first entry.

    Raises:
        ConfigError: an entry that is not NAME=URL, a name given twice, or a URL of another kind.
    """
    found: dict[str, str] = {}
    for n, entry in enumerate(os.environ.get(SQL_DATABASES.name, "").split(), 1):
        name, equals, url = entry.partition("=")
        if not equals or not _NAME.fullmatch(name):  # the entry is not shown: it may hold a password
            raise ConfigError(f"{SQL_DATABASES.name}: entry {n} is not NAME=URL (a name of up to 64 letters, "
                              "digits and _ . -, then = and the URL; entries are separated by spaces)")
        if name in found:
            raise ConfigError(f"{SQL_DATABASES.name}: the name {name} is given twice")
        found[name] = _checked(url, f"{SQL_DATABASES.name}: {name}")
    single = os.environ.get(SQL_URL.name)
    if single:
        if DEFAULT in found:
            raise ConfigError(f"{SQL_URL.name} and {SQL_DATABASES.name} both name the database {DEFAULT}: keep one")
        found = {DEFAULT: _checked(single, SQL_URL.name), **found}
    elif DEFAULT in found:
        found = {DEFAULT: found.pop(DEFAULT), **found}
    return found


def _checked(url: str, where: str) -> str:
    if not url.startswith(_SCHEMES):
        raise ConfigError(f"{where}: the URL must start with sqlite:/// or postgresql://")
    return url


def _chosen(db: str | None, databases: Mapping[str, str]) -> str:
    """The configured name `db` stands for (the default when None); nothing is opened here.

    Raises:
        BadArgument: nothing configured, a URL, or a name that is not configured.
    """
    names = f"(configured: {', '.join(databases)})"
    if not databases:
        raise BadArgument("db", f"no database is configured (set {SQL_DATABASES.name} or {SQL_URL.name})")
    if db is None:
        return next(iter(databases))
    if "://" in db:  # not echoed: it may hold a password, and every URL must answer alike
        raise BadArgument("db", f"give the name of a configured database, not a URL {names}")
    if db not in databases:
        raise BadArgument("db", f"no database named {db[:64]!r} is configured {names}")
    return db


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def encode(value: object) -> JSON:
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

    def key_of(self, row: Mapping[str, LooseJSON]) -> JSONObject:
        return {column: row[column] for column in self.key}

    def where(self, key: Mapping[str, LooseJSON], argument: str = "key") -> tuple[str, list[LooseJSON]]:
        """`"a" = ? AND "b" = ?` and its parameters, for a key naming exactly the primary key's columns."""
        if not isinstance(key, Mapping) or set(key) != set(self.key):
            raise BadArgument(argument, f"expected the primary key of {self.name}: {', '.join(self.key)}")
        return " AND ".join(f"{q} = ?" for q in self.quoted(self.key, argument)), [key[c] for c in self.key]


class Database:
    """One open connection; `kind` is `sqlite` or `postgresql`; `name` is its configured name."""

    def __init__(self, kind: str, name: str, conn: Any) -> None:
        self.kind, self.name, self._conn = kind, name, conn

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

    def rows(self, sql: str, params: Sequence[JSONView] = ()) -> list[Row]:
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
            raise BadArgument("table", f"no table {name!r} in {self.name}")
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

    def is_reversi_store(self) -> bool:
        """Whether this database holds Reversi's own tables (where a table name could reach them)."""
        marks = " OR ".join(["(t = ? AND c = ?)"] * len(_STORE_MARKS))
        params = [part for mark in _STORE_MARKS for part in mark]
        if self.kind == "sqlite":
            columns = ("SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p"
                       " WHERE m.type = 'table'")
        else:
            columns = ("SELECT c.relname::text AS t, a.attname::text AS c FROM pg_attribute a"
                       " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                       " WHERE n.nspname = ANY(current_schemas(false)) AND NOT a.attisdropped")
        return bool(self.rows(f"SELECT 1 FROM ({columns}) AS found WHERE {marks} LIMIT 1", params))

    def _parameter(self, value: JSONView) -> object:
        if isinstance(value, Mapping) and set(value) == {"$base64"}:
            return base64.b64decode(str(value["$base64"]))
        if isinstance(value, dict | list):
            return Jsonb(value) if self.kind == "postgresql" else json.dumps(value)
        return value

    @property
    def for_update(self) -> str:
        return " FOR UPDATE" if self.kind == "postgresql" else ""


def open_database(db: str | None) -> Database:
    """Connect to the configured database named `db` (the default when None), unless it is Reversi's store.

    Raises:
        ConfigError: the configuration is malformed.
        BadArgument: `db` is a URL or no configured name, the database is Reversi's own store, or no
            SQLite file is there.
        ConnectorError: the database cannot be reached.
    """
    databases = configured()
    name = _chosen(db, databases)
    url = databases[name]
    database = _connect(name, url)
    try:
        if _is_the_store_url(url) or database.is_reversi_store():
            raise BadArgument("db", f"{name} is Reversi's own store: the sql connector never acts on it")
    except BaseException:
        database.close()
        raise
    return database


def _connect(name: str, url: str) -> Database:
    if url.startswith("sqlite:///"):
        path = Path(os.path.abspath(url.removeprefix("sqlite:///")))
        try:  # mode=rw: a missing file is an error, never a new empty database
            conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=10)
        except sqlite3.OperationalError:
            raise BadArgument("db", f"{name}: no SQLite database at {path}") from None
        return Database("sqlite", name, conn)
    try:
        given = conninfo_to_dict(url)  # an unreachable host stalls no call for long, unless the URL says so
        pg = psycopg.connect(url, autocommit=True, connect_timeout=given.get("connect_timeout", _CONNECT_TIMEOUT_S))
    except psycopg.Error as exc:
        raise ConnectorError(f"cannot connect to the database {name}: {_without_password(str(exc), url)}") from exc
    return Database("postgresql", name, pg)


def _without_password(text: str, url: str) -> str:
    password = urlsplit(url).password
    return " ".join((text.replace(password, "***") if password else text).split())


def _is_the_store_url(url: str) -> bool:
    """Whether `url` is the store this process was given (REVERSI_DB): the same file, or the same URL."""
    store = os.environ.get("REVERSI_DB", "").strip()
    if not store:
        return False
    if url.startswith("sqlite:///") and store.startswith("sqlite:///"):
        mine, theirs = (os.path.abspath(u.removeprefix("sqlite:///")) for u in (url, store))
        return mine == theirs or (os.path.exists(mine) and os.path.exists(theirs) and os.path.samefile(mine, theirs))
    return url.replace("postgres://", "postgresql://", 1) == store.replace("postgres://", "postgresql://", 1)

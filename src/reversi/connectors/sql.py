"""The `sql` connector: rows named by primary key in SQLite or PostgreSQL, each change undoable.

An agent names one of the databases the operator configured (`_sql_db`). A forward call reads each
row it touches under a lock (`BEGIN IMMEDIATE`, `SELECT ... FOR UPDATE`) before and after the change,
in one transaction, and keeps both images as one content-addressed snapshot; its result, sealed
(`_seal`), names the database by its configured name, the table, the rows' keys and the snapshot's
digest, plus the digest of the rows as they were, for a read-back to expect. An undo takes that whole
result, acts only on what its seal covers, and puts each row back only while it still equals what
the step left.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from reversi.connectors import _snapshots
from reversi.connectors._base import STEP, Connector, Param, Tool, ToolKind
from reversi.connectors._seal import KEY, Sealed, sealed, unseal
from reversi.connectors._sql_db import SQL_DATABASES, SQL_URL, Database, Row, Table, open_database
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject, canonical
from reversi.errors import BadArgument, ChangedSince, ConnectorError

__all__ = ["CONNECTOR", "delete", "delete_rows", "insert", "restore_rows", "select", "update"]

Image = LooseJSONObject  # {"key": {...}, "before": row | None, "after": row | None}


def rows_sha256(rows: list[Row | None]) -> str:
    """The digest a read-back compares: the rows present, in key order, as canonical JSON."""
    present = [row for row in rows if row is not None]
    return hashlib.sha256(canonical(present).encode()).hexdigest()


@contextmanager
def _opened(db: str | None) -> Iterator[Database]:
    database = open_database(db)
    try:
        yield database
    finally:
        database.close()


def _read(database: Database, table: Table, key: Mapping[str, LooseJSON], argument: str = "key", *,
          lock: bool) -> Row | None:
    where, params = table.where(key, argument)
    found = database.rows(f"SELECT * FROM {table.sql_name} WHERE {where}{database.for_update if lock else ''}", params)
    return found[0] if found else None


def _keep(database: Database, table: Table, images: list[Image]) -> JSONObject:
    """Keep the images as a snapshot; the forward result naming it."""
    document = {"db": database.name, "table": table.name, "key": list(table.key), "rows": images}
    sha = _snapshots.store(json.dumps(document, sort_keys=True).encode())
    return {"db": database.name, "table": table.name, "keys": [image["key"] for image in images],
            "images": sha, "before_sha256": rows_sha256([i["before"] for i in images])}


def _columns(table: Table, row: LooseJSON, argument: str) -> list[str]:
    if not isinstance(row, Mapping):
        raise BadArgument(argument, "expected an object of column values")
    table.quoted(list(row), argument)
    return list(row)


# --- forward tools -----------------------------------------------------------------------------


@sealed("sql.insert")
def insert(table: str, rows: list[LooseJSON], db: str | None = None) -> JSONObject:
    """Insert rows; the result names each row's primary key (generated ones included).

    Raises:
        BadArgument: no such table or column, no primary key, or a row that is not an object.
        ConnectorError: the database refused the insert (nothing was inserted).
    """
    if not rows:
        raise BadArgument("rows", "give at least one row")
    with _opened(db) as database:
        found = database.table(table)
        images: list[Image] = []
        with _failures(database), database.transaction():
            for n, row in enumerate(rows):
                names = _columns(found, row, f"rows[{n}]")
                quoted, key = ", ".join(found.quoted(names, f"rows[{n}]")), ", ".join(found.quoted(found.key, "key"))
                values = f"({quoted}) VALUES ({', '.join('?' * len(names))})" if names else "DEFAULT VALUES"
                made = database.rows(f"INSERT INTO {found.sql_name} {values} RETURNING {key}",
                                     [row[c] for c in names])[0]
                images.append({"key": made, "before": None, "after": _read(database, found, made, lock=True)})
            return _keep(database, found, images)


@sealed("sql.update")
def update(table: str, key: LooseJSONObject, values: LooseJSONObject, db: str | None = None) -> JSONObject:
    """Set some columns of the row with this primary key (the key itself cannot change).

    Raises:
        BadArgument: no such table, column or row, or a value for a key column.
        ConnectorError: the database refused the update (nothing was changed).
    """
    with _opened(db) as database:
        found = database.table(table)
        names = _columns(found, values, "values")
        if not names or set(names) & set(found.key):
            raise BadArgument("values", f"give columns to set, not the primary key ({', '.join(found.key)})")
        with _failures(database), database.transaction():
            before = _existing(database, found, key)
            where, params = found.where(key)
            sets = ", ".join(f"{q} = ?" for q in found.quoted(names, "values"))
            database.rows(f"UPDATE {found.sql_name} SET {sets} WHERE {where}", [values[c] for c in names] + params)
            image = {"key": found.key_of(before), "before": before, "after": _read(database, found, key, lock=True)}
            return _keep(database, found, [image])


@sealed("sql.delete")
def delete(table: str, key: LooseJSONObject, db: str | None = None) -> JSONObject:
    """Delete the row with this primary key, keeping its before-image.

    Raises:
        BadArgument: no such table or row.
        ConnectorError: the database refused the delete (nothing was deleted).
    """
    with _opened(db) as database:
        found = database.table(table)
        with _failures(database), database.transaction():
            before = _existing(database, found, key)
            where, params = found.where(key)
            database.rows(f"DELETE FROM {found.sql_name} WHERE {where}", params)
            return _keep(database, found, [{"key": found.key_of(before), "before": before, "after": None}])


def _existing(database: Database, table: Table, key: LooseJSON) -> Row:
    row = _read(database, table, key, lock=True)
    if row is None:
        raise BadArgument("key", f"no row of {table.name} has {_describe(key)}")
    return row


@contextmanager
def _failures(database: Database) -> Iterator[None]:
    """The driver's errors (constraints, types) as the connector's, naming the database."""
    try:
        yield
    except ConnectorError:
        raise
    except Exception as exc:
        if not type(exc).__module__.startswith(("sqlite3", "psycopg")):
            raise
        raise ConnectorError(f"{database.name}: {' '.join(str(exc).split())}") from exc


def _describe(key: Mapping[str, LooseJSON]) -> str:
    return ", ".join(f"{column}={json.dumps(value)}" for column, value in key.items())


# --- compensations -----------------------------------------------------------------------------


def _images(made: LooseJSONObject, database: Database, table: Table) -> list[Image]:
    """The images the sealed result `made` names, from the snapshot kept under its digest."""
    document = json.loads(_snapshots.load(made.get("images", "")))
    if [document.get(k) for k in ("db", "table", "key")] != [database.name, table.name, list(table.key)]:
        raise ConnectorError(f"snapshot {made['images']} is not of {table.name} in {database.name}")
    images: list[Image] = document["rows"]
    return images


def _put_back(database: Database, table: Table, image: Image, step: int | None) -> None:
    key, before, after = image["key"], image["before"], image["after"]
    now = _read(database, table, key, "images", lock=True)
    if now == before:
        return  # already as it was: a repeat of this undo
    where, params = table.where(key, "images")
    if now != after:
        raise ChangedSince(step, _difference(table, key, now, after))
    if before is None:
        database.rows(f"DELETE FROM {table.sql_name} WHERE {where}", params)
    elif after is None:
        names = list(before)
        quoted = ", ".join(table.quoted(names, "images"))
        database.rows(f"INSERT INTO {table.sql_name} ({quoted}) VALUES ({', '.join('?' * len(names))})",
                      [before[c] for c in names])
    else:
        names = [c for c in before if c not in table.key]
        sets = ", ".join(f"{q} = ?" for q in table.quoted(names, "images"))
        database.rows(f"UPDATE {table.sql_name} SET {sets} WHERE {where}", [before[c] for c in names] + params)


def _difference(table: Table, key: Mapping[str, LooseJSON], now: Row | None, left: Row | None) -> str:
    row = f"the row of {table.name} with {_describe(key)}"
    if now is None:
        return f"{row} no longer exists"
    if left is None:
        return f"{row} exists again"
    column = next(c for c in sorted(set(now) | set(left)) if now.get(c) != left.get(c))
    return f"{row}: {column} is {json.dumps(now.get(column))}, the step left {json.dumps(left.get(column))}"


def restore_rows(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Put each row back to its before-image, only while it still equals what the step left.

    `result` is the whole result of the `sql.update` or `sql.delete` being undone, as it returned
    it. All rows or none: one that changed since leaves every row as it is. A repeat finds the rows
    already back and answers the same.

    Raises:
        UntrustedResult: `result` is not one this connector sealed for those tools.
        ChangedSince: a row differs from the step's after-image.
        ConnectorError: the snapshot is missing or damaged, or the database refused.
    """
    return _restore(unseal(result, _CHANGES), step)


def delete_rows(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Delete the rows an `sql.insert` made (its whole `result`), only while each still equals what it left.

    Raises:
        UntrustedResult: `result` is not one this connector sealed for `sql.insert`.
        ChangedSince: a row differs from what the insert left.
    """
    return _restore(unseal(result, _INSERTS), step)


_INSERTS, _CHANGES = ("sql.insert",), ("sql.update", "sql.delete")


def _restore(made: Sealed, step: int | None) -> JSONObject:
    db, table = made.result.get("db"), made.result.get("table")
    if not isinstance(db, str) or not isinstance(table, str):
        raise ConnectorError(f"the sealed result of {made.tool} names no database and table")
    with _opened(db) as database:
        found = database.table(table)
        kept = _images(made.result, database, found)
        with _failures(database), database.transaction():
            for image in kept:
                _put_back(database, found, image, step)
        return {"db": database.name, "table": found.name, "keys": [i["key"] for i in kept], "rows": len(kept)}


# --- read ----------------------------------------------------------------------------------------


def select(table: str, key: LooseJSONObject | None = None, keys: list[LooseJSON] | None = None,
           db: str | None = None) -> LooseJSONObject:
    """The rows with these primary keys (`key`, or a list in `keys`): `rows`, `count`, `row`, `sha256`.

    Raises:
        BadArgument: not exactly one of key and keys, or no such table.
    """
    if (key is None) == (keys is None):
        raise BadArgument("key", "give exactly one of key and keys")
    with _opened(db) as database:
        found = database.table(table)
        wanted = [key] if key is not None else list(keys or [])
        rows = [r for k in wanted if (r := _read(database, found, k, lock=False)) is not None]
        return {"db": database.name, "table": found.name, "rows": rows, "count": len(rows),
                "row": rows[0] if rows else None, "sha256": rows_sha256(list(rows))}


_DB = Param("db", "string", "the name of a database the operator configured (never a URL);"
            " without it, the default one", required=False)
_TABLE = Param("table", "string", "the table's name, exactly as the schema has it")
_KEY = Param("key", "object", "the primary key's columns and values")
_RESULT = Param("result", "object", "the forward call's whole result, as it returned it (sealed)")

CONNECTOR = Connector(
    name="sql",
    description="rows by primary key in SQLite or PostgreSQL",
    settings=(SQL_DATABASES, SQL_URL, _snapshots.SETTING, KEY),
    tools=(
        Tool("sql.insert", ToolKind.FORWARD, insert, "Insert rows; answers their primary keys.",
             (_DB, _TABLE, Param("rows", "array", "the rows, each an object of column values"))),
        Tool("sql.update", ToolKind.FORWARD, update, "Set columns of the row with a primary key.",
             (_DB, _TABLE, _KEY, Param("values", "object", "the columns to set and their values")), destructive=True),
        Tool("sql.delete", ToolKind.FORWARD, delete, "Delete the row with a primary key.", (_DB, _TABLE, _KEY),
             destructive=True),
        Tool("sql.delete_rows", ToolKind.COMPENSATION, delete_rows, "Delete the rows an insert made, if unchanged.",
             (_RESULT, STEP), destructive=True, idempotent=True),
        Tool("sql.restore_rows", ToolKind.COMPENSATION, restore_rows, "Put rows back to their before-images.",
             (_RESULT, STEP), destructive=True, idempotent=True),
        Tool("sql.select", ToolKind.READ, select, "The rows with some primary keys.",
             (_DB, _TABLE, Param("key", "object", "one primary key", required=False),
              Param("keys", "array", "several primary keys", required=False))),
    ),
)

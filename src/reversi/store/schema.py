"""The ledger's schema: the script a fresh store starts from, the numbered migrations an older one is
brought forward by, and the one runner both back ends apply them with.

The SQL lives in `.sql` files in the package: `schema.sql` beside this module, and
`migrations/NNNN_what_it_does.sql`. A file that runs on both back ends says so on its first line
(`SHARED`); where they differ, a version has one file per back end instead, named for it
(`NNNN_what_it_does.sqlite.sql`, `NNNN_what_it_does.postgresql.sql`). The runner's own statements are
named ones (`sql.py`), in `schema_migrations.sql`. A back end supplies the transaction the runner
works in, which must hold the migration lock (only one process migrates a store at a time), and the
way its driver writes placeholders.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Literal, get_args

from reversi.core.models import utc_now
from reversi.errors import SchemaFilesError
from reversi.store.sql import load
from reversi.store.statements import Cursor

Backend = Literal["sqlite", "postgresql"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

# The first line of every file written for both back ends.
SHARED = "-- Written for both SQLite and PostgreSQL."
_MIGRATION_NAME = re.compile(r"(?P<version>\d{4})_(?P<what>\w+?)(?:\.(?P<backend>sqlite|postgresql))?\.sql")
# `schema.sql` names, in its header, the last migration it holds.
_SCHEMA_VERSION = re.compile(r"^-- The schema as of migration (\d{4})\b", re.M)

_SQL = load("schema_migrations.sql")

# The store's own secrets, made with its schema (so that no read has to write one later, on a replica say).
MADE_SECRETS = ("masking",)
SECRET_INSERT = load("secrets.sql")["insert_secret"]


@dataclass(frozen=True)
class Migration:
    """One numbered migration as one back end applies it."""

    version: int
    name: str  # its file's name
    script: str


def pick(names: Iterable[str], backend: Backend) -> list[tuple[int, str]]:
    """The migration file each version has for `backend`, in order, from a folder's file names.

    Raises:
        SchemaFilesError: a version has two shared files, a shared file and a back end's, or a file
            for one back end but not the other.
    """
    by_version: dict[int, dict[str | None, str]] = {}
    for name in names:
        match = _MIGRATION_NAME.fullmatch(name)
        if match:
            files = by_version.setdefault(int(match["version"]), {})
            if match["backend"] in files:
                raise SchemaFilesError(f"migration {match['version']} has two files: {files[match['backend']]}, {name}")
            files[match["backend"]] = name
    picked = []
    for version, files in sorted(by_version.items()):
        if None in files and len(files) > 1:
            both = ", ".join(sorted(files.values()))
            raise SchemaFilesError(f"migration {version:04d} has a shared file and a back end's: {both}")
        if None not in files and set(files) != set(BACKENDS):
            raise SchemaFilesError(f"migration {version:04d} has a file for {', '.join(map(str, files))} only")
        picked.append((version, files.get(None) or files[backend]))
    return picked


def migrations(backend: Backend) -> list[Migration]:
    """The numbered migrations `backend` applies, in order.

    Raises:
        SchemaFilesError: as `pick`.
    """
    folder = resources.files("reversi.store.migrations")
    names = [entry.name for entry in folder.iterdir()]
    return [Migration(version, name, folder.joinpath(name).read_text()) for version, name in pick(names, backend)]


def schema_script() -> tuple[int, str]:
    """`schema.sql`: the last migration it holds, and the script.

    Raises:
        SchemaFilesError: its header does not name that migration.
    """
    script = resources.files("reversi.store").joinpath("schema.sql").read_text()
    found = _SCHEMA_VERSION.search(script)
    if found is None:
        raise SchemaFilesError("schema.sql does not say which migration it is the schema as of")
    return int(found.group(1)), script


def statements(script: str) -> list[str]:
    """Split a script into statements (no statement of ours holds a ';' inside)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def install_statements(backend: Backend) -> list[str]:
    """Every statement a fresh install runs: `schema.sql`, then the migrations it does not hold yet."""
    held, script = schema_script()
    return [*statements(script), *(s for m in migrations(backend) if m.version > held for s in statements(m.script))]


def new_secrets() -> list[tuple[str, str, str]]:
    """A fresh value of each of `MADE_SECRETS`, for `SECRET_INSERT` once the schema is made."""
    return [(name, secrets.token_hex(32), utc_now()) for name in MADE_SECRETS]


def plan(done: set[int], schema: tuple[int, str], found: list[Migration]) -> tuple[list[str], list[int]]:
    """What bringing a store forward takes: the scripts to run, in order, and the versions to record.
    A store with no version recorded is empty: it gets `schema` (the last migration it holds, and its
    script), then the migrations after that one; another gets the migrations it has not recorded."""
    held, script = schema if not done else (0, "")
    scripts = [script] if script else []
    scripts += [m.script for m in found if m.version not in done and m.version > held]
    return scripts, [m.version for m in found if m.version not in done]


def migrate(cur: Cursor, backend: Backend, sql: Callable[[str], str]) -> list[int]:
    """Bring the store's schema up to date (see `plan`), in the caller's transaction, which must hold
    the back end's migration lock. `sql` turns `?` placeholders into the driver's. Returns the
    versions recorded now.

    Raises:
        SchemaFilesError: as `migrations` and `schema_script`.
    """
    cur.execute(_SQL["create_migrations"])
    done = {int(row[0]) for row in cur.execute(_SQL["done_migrations"]).fetchall()}
    scripts, versions = plan(done, schema_script(), migrations(backend))
    for script in scripts:
        for statement in statements(script):
            cur.execute(statement)
    for version in versions:
        cur.execute(sql(_SQL["record_migration"]), (version,))
    for row in new_secrets() if versions else ():
        cur.execute(sql(SECRET_INSERT), row)
    return versions

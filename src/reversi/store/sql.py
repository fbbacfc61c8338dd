"""The store's SQL statements, read from the `.sql` files beside the modules that run them.

A file holds named statements, as procrastinate writes them: a line `-- name: what_it_is`, comment
lines that say what it is for, then the statement (a trailing `;` is dropped, full-line comments
are never sent). Before its first name a file has comments only: its first line says which back
ends it is written for (`schema.SHARED`, or one back end's name). A module reads its file once, at
import (`load`), and takes each statement by name; a name the file lacks is a KeyError.

A statement may hold slots, `{like_this}`. A slot named after another statement of the same file is
that statement, put in when the file is read (a column list, say). Any other slot is filled by the
module that runs it (`fill`) with more SQL of the files, or with a list of `?` marks (`marks`):
which optional filters a query has, how many ids an `IN (...)` holds. Values are always
parameters; the few statements that can take none (a pragma, a `SET`, a `BEGIN` sent with a second
statement) get constants of ours through a slot.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

from reversi.errors import SchemaFilesError

_NAME = re.compile(r"--\s*name:\s*(.*?)\s*")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
_SLOT = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_SPACED_SLOT = re.compile(r"( ?)\{([a-z][a-z0-9_]*)\}")


class SQLFile(dict[str, str]):
    """The statements of one file by name; a name it lacks is a KeyError that names the file."""

    def __init__(self, source: str, statements: dict[str, str]) -> None:
        super().__init__(statements)
        self.source = source

    def __missing__(self, name: str) -> str:
        raise KeyError(f"{self.source} has no statement named {name!r}")


def parse(text: str, source: str) -> SQLFile:
    """The named statements of a file's `text`, with the slots that name another of them put in;
    `source` names the file in errors.

    Raises:
        SchemaFilesError: the file names no statement, names one twice or badly, has SQL before its
            first name, has a name with no statement, or a statement that holds itself.
    """
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        named = _NAME.fullmatch(stripped)
        if named:
            name = named[1]
            if not _IDENTIFIER.fullmatch(name):
                raise SchemaFilesError(f"{source}:{number}: {name!r} is not a name (lower case, digits, _)")
            if name in found:
                raise SchemaFilesError(f"{source}:{number}: {name!r} is named twice")
            current = found[name] = []
        elif not stripped or stripped.startswith("--"):
            continue
        elif current is None:
            raise SchemaFilesError(f"{source}:{number}: SQL before the first `-- name:` line")
        else:
            current.append(line.rstrip())
    if not found:
        raise SchemaFilesError(f"{source} names no statement (`-- name: ...` lines)")
    statements = {}
    for name, lines in found.items():
        statements[name] = "\n".join(lines).strip().removesuffix(";").rstrip()
        if not statements[name]:
            raise SchemaFilesError(f"{source}: {name!r} has no statement")
    return SQLFile(source, _put_in(statements, source))


def _put_in(statements: dict[str, str], source: str) -> dict[str, str]:
    """Each statement with the slots that name another statement of the file replaced by it."""
    done: dict[str, str] = {}

    def resolved(name: str, within: tuple[str, ...]) -> str:
        if name in within:
            raise SchemaFilesError(f"{source}: {name!r} holds itself (through {' -> '.join(within)})")
        if name not in done:
            done[name] = _SLOT.sub(
                lambda slot: resolved(slot[1], (*within, name)) if slot[1] in statements else slot[0],
                statements[name])
        return done[name]

    return {name: resolved(name, ()) for name in statements}


@functools.cache
def load(file: str) -> SQLFile:
    """The statements of `file`, a `.sql` file of the `reversi.store` package (read once).

    Raises:
        SchemaFilesError: as `parse`.
    """
    return parse(resources.files("reversi.store").joinpath(file).read_text(), f"reversi/store/{file}")


@functools.lru_cache(maxsize=256)
def fill(text: str, /, **slots: str) -> str:
    """`text` with each slot filled by the SQL given for it (extra ones are ignored). Cached: a statement
    has few forms, so each is made once.

    Raises:
        KeyError: `text` has a slot that was not given.
    """

    def filled(slot: re.Match[str]) -> str:
        if slot[2] not in slots:
            raise KeyError(f"no SQL given for the slot {{{slot[2]}}} of: {text}")
        return slot[1] + slots[slot[2]] if slots[slot[2]] else ""  # an empty slot takes its space along

    return _SPACED_SLOT.sub(filled, text).strip()


@functools.lru_cache(maxsize=256)
def marks(count: int, mark: str = "?") -> str:
    """`count` copies of `mark` (a `?`, or a row's `(?, ?)`) as a list, for an `IN (...)` or `VALUES`."""
    return ", ".join([mark] * count)


def optional(fragment: str, params: list[Any], *values: Any) -> str:
    """An optional part of a statement: `fragment`, with `values` appended to `params`, when none of them
    is None; else "" and nothing appended. Fill a statement's slots in their order in its text, so that
    the parameters follow its `?` marks."""
    if any(value is None for value in values):
        return ""
    params.extend(values)
    return fragment

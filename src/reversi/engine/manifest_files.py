"""Reading manifest files (and recorded tool listings) from disk; the parsing itself is pure
(`reversi.core.manifest_yaml`, `reversi.core.tool_listing`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence

from reversi.core.json_values import parse_json
from reversi.core.manifest import ManifestSet, Problem, ToolEntry, merge
from reversi.core.manifest_fit import fit_problems, key_lines
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.tool_listing import Listing, parse_listing
from reversi.errors import BadInput, ManifestError

__all__ = ["MAX_MANIFEST_BYTES", "check_manifest_files", "check_manifest_fit", "load_manifest_files", "read_listing"]

# A manifest is a few kilobytes; one this large is another file, and parsing it would take minutes
# and gigabytes.
MAX_MANIFEST_BYTES = 4 << 20


def load_manifest_files(paths: Sequence[str | os.PathLike[str]]) -> ManifestSet:
    """Read, parse and merge manifest files, in the order given.

    Raises:
        ManifestError: A file cannot be read or has a problem (warnings do not count); its
            `problems` lists every problem as `FILE:LINE: message`.
    """
    manifests, problems = _read(paths)
    errors = [str(problem) for problem in problems if not problem.warning]
    if errors:
        raise ManifestError(errors)
    return manifests


def check_manifest_files(paths: Sequence[str | os.PathLike[str]]) -> list[Problem]:
    """Every problem and warning in the files, for `reversi manifest check`."""
    return _read(paths)[1]


def read_listing(path: str | os.PathLike[str]) -> Listing:
    """A server's tools as recorded in a file: a JSON `tools/list` result.

    Raises:
        BadInput: the file cannot be read, or is not such a result (the message names the file).
    """
    source = os.fspath(path)
    try:
        text = _bounded_text(path)
    except ValueError as error:
        raise BadInput(f"{source}: cannot read: {error}") from None
    return parse_listing(parse_json(text, source), source)


def _bounded_text(path: str | os.PathLike[str]) -> str:
    """A regular file's text, read no further than MAX_MANIFEST_BYTES (`-m /dev/zero` must not hang).

    It is opened without blocking and refused unless it is a regular file: a FIFO would wait for a
    writer forever, a device would give bytes without end.

    Raises:
        ValueError: it cannot be read, is not a regular file, is larger, or is not UTF-8; the message
            says which.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise ValueError(error.strerror or str(error)) from None
    kind = _kind(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise ValueError(f"it is {kind}, not a regular file")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(MAX_MANIFEST_BYTES + 1)
        except OSError as error:
            raise ValueError(error.strerror or str(error)) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"larger than {MAX_MANIFEST_BYTES >> 20} MiB, which no manifest needs (is it the right file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _kind(mode: int) -> str | None:
    """What a file that is not a regular one is (`a FIFO`); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def check_manifest_fit(
    paths: Sequence[str | os.PathLike[str]],
    listing: Listing,
    judged: Callable[[str], bool] | None = None,
    *,
    fit_only: bool = False,
) -> list[Problem]:
    """`check_manifest_files`, then (when the files are valid) every way they do not fit a server's
    tools (`reversi.core.manifest_fit`); `judged` as there. With `fit_only`, the latter alone (and
    nothing when the files are invalid)."""
    texts: dict[str, str] = {}
    manifests, problems = _read(paths, texts)
    if any(not problem.warning for problem in problems) or not paths:
        return [] if fit_only else problems
    if fit_only:
        problems = []
    lines = {source: key_lines(text) for source, text in texts.items()}
    first = os.fspath(paths[0])
    missing_at = (first, lines.get(first, {}).get(("tools",), 0))
    return problems + fit_problems(manifests, listing, lines=lines, missing_at=missing_at, judged=judged)


def _read(
    paths: Sequence[str | os.PathLike[str]], texts: dict[str, str] | None = None
) -> tuple[ManifestSet, list[Problem]]:
    parsed: list[list[ToolEntry]] = []
    problems: list[Problem] = []
    for path in paths:
        source = os.fspath(path)
        try:
            text = _bounded_text(path)
        except ValueError as error:
            problems.append(Problem(source, 0, f"cannot read: {error}"))
            continue
        if texts is not None:
            texts[source] = text
        entries, found = parse_manifest(text, source)
        parsed.append(entries)
        problems.extend(found)
    manifests, duplicates = merge(parsed)
    return manifests, problems + duplicates

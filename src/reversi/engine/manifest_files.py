"""Reading manifest files from disk; the parsing itself is pure (`reversi.core.manifest`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from reversi.core.manifest import ManifestSet, Problem, ToolEntry, merge
from reversi.core.manifest_yaml import parse_manifest
from reversi.errors import ManifestError

__all__ = ["MAX_MANIFEST_BYTES", "check_manifest_files", "load_manifest_files"]

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


def _read(paths: Sequence[str | os.PathLike[str]]) -> tuple[ManifestSet, list[Problem]]:
    parsed: list[list[ToolEntry]] = []
    problems: list[Problem] = []
    for path in paths:
        source = os.fspath(path)
        try:
            with Path(path).open("rb") as file:
                data = file.read(MAX_MANIFEST_BYTES + 1)
            if len(data) > MAX_MANIFEST_BYTES:
                problems.append(Problem(source, 0, f"cannot read: larger than {MAX_MANIFEST_BYTES >> 20} MiB, which "
                                        "no manifest needs (is it the right file?)"))
                continue
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(Problem(source, 0, "cannot read: not UTF-8 text"))
            continue
        except OSError as error:
            problems.append(Problem(source, 0, f"cannot read: {error.strerror or error}"))
            continue
        entries, found = parse_manifest(text, source)
        parsed.append(entries)
        problems.extend(found)
    manifests, duplicates = merge(parsed)
    return manifests, problems + duplicates

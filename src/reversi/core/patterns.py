"""Regular expressions from manifests (`$search`'s `pattern`), run on RE2. Pure: no I/O.

A manifest's pattern meets text an agent or an upstream server wrote (a result, a capture), so it runs
on an engine that never backtracks: RE2 takes time linear in the text whatever the pattern, and refuses
what it cannot run that way (backreferences, lookarounds). Linear is still the text's length times the
pattern's size in the worst case, so both are bounded: a pattern compiles to at most MAX_PROGRAM_SIZE
instructions, and scans at most the first MAX_SCAN_CHARS characters of a text (a few seconds, worst).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["MAX_PROGRAM_SIZE", "MAX_SCAN_CHARS", "check_pattern", "first_match"]

MAX_SCAN_CHARS = 1 << 16
"""How much of a text a pattern scans: its first 65,536 characters (a match past them is not found)."""
MAX_PROGRAM_SIZE = 1000
"""The most RE2 instructions a pattern may compile to; the ids, names and numbers that `$search` picks
out of URLs and status lines take well under 100."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the caller's one-line problem, not a line RE2 logs


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """The pattern compiled with `^` and `$` at each line, as the manifest language has it.

    Raises:
        ValueError: RE2 cannot run it; the message is RE2's reason.
    """
    try:
        re2.compile(pattern, _OPTIONS)  # alone first, so that RE2's reason quotes the pattern as written
        compiled = re2.compile(f"(?m){pattern}", _OPTIONS)
    except UnicodeEncodeError:
        raise ValueError("it holds a lone surrogate, which is not text") from None
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "cannot compile it"
        raise ValueError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(f"it compiles to {compiled.programsize} instructions, over the {MAX_PROGRAM_SIZE} a pattern "
                         "may take (a repetition like {100} counts its part 100 times)")
    return compiled


def check_pattern(pattern: str) -> str | None:
    """Why RE2 cannot run `pattern` (e.g. `invalid escape sequence: \\1`), or None when it can."""
    try:
        _compiled(pattern)
    except ValueError as exc:
        return str(exc)
    return None


def first_match(pattern: str, text: str, group: int | None = None) -> str | None:
    """The first match of `pattern` in the first MAX_SCAN_CHARS of `text`: group `group` of it when
    given (0: the whole match), else its first group when it has groups, else the whole match; None when
    there is none (or that group took no part in it, or the pattern has no such group).

    Raises:
        ValueError: RE2 cannot run the pattern (manifests are checked before this runs).
    """
    compiled = _compiled(pattern)
    text = text[:MAX_SCAN_CHARS]
    try:
        found = compiled.search(text)
    except UnicodeEncodeError:  # a lone surrogate, which RE2's UTF-8 cannot hold: searched as U+FFFD
        found = compiled.search(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    if found is None:
        return None
    if group is None:
        group = 1 if compiled.groups else 0
    if group > compiled.groups:
        return None
    matched: str | None = found.group(group)
    return matched

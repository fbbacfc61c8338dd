"""Text for a terminal: what an agent, an upstream server or a command wrote, with its control
characters made visible. Pure: no I/O.

A tool name, an actor or a compensator's stderr line can hold escape sequences (clear the screen,
write the clipboard, set the window title) or bidirectional overrides that make a line read other than
it is. Text output shows each such character escaped instead (`\\x1b`, `\\u202e`); newline and tab
stay, as the layout needs them. JSON stays exact: it escapes them the JSON way (`\\u001b`).
"""

from __future__ import annotations

import logging
import secrets

from reversi.core.sensitive import Masker

__all__ = ["ESCAPED", "TerminalFormatter", "for_terminal", "json_for_terminal"]

# Unicode's bidirectional formatting characters (marks, embeddings, overrides, isolates) and its
# line and paragraph separators, which some terminals lay out as breaks.
_LAYOUT = (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x20), 0x7F, *range(0x80, 0xA0))  # C0, DEL and C1

ESCAPED = frozenset(chr(c) for c in (*_CONTROLS, *_LAYOUT)) - {"\n", "\t"}
"""The characters `for_terminal` escapes."""

_TERMINAL = {ord(c): f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in ESCAPED}
# JSON text (from `json.dumps`) holds these raw only inside its strings, where `\\uXXXX` is their JSON form;
# it escapes C0 itself.
_JSON = {ord(c): f"\\u{ord(c):04x}" for c in ESCAPED if ord(c) >= 0x20}


def for_terminal(text: str) -> str:
    """`text` with every control character but newline and tab, and every bidirectional or line
    separating format character, written as a visible escape (`\\x1b`, `\\x9b`, `\\u202e`)."""
    return text.translate(_TERMINAL)


def json_for_terminal(text: str) -> str:
    """JSON text (as `json.dumps` writes it) with the characters `for_terminal` escapes that JSON leaves
    raw (DEL, C1, the bidirectional ones) written as JSON escapes: the same JSON value, safe to print."""
    return text.translate(_JSON)


class TerminalFormatter(logging.Formatter):
    """A log formatter whose lines are `for_terminal`, with the secrets text can hold masked (URL
    passwords and keys, credentials, card numbers: `Masker.text`): a log line quotes what agents and
    upstreams sent. Its masks are this process's own."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._masker = Masker(secrets.token_bytes(32))

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(self._masker.text(super().format(record)))

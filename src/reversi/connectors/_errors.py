"""Errors as the one line a compensator, a reader or an MCP tool result reports."""

from __future__ import annotations

from reversi.errors import ReversiError

__all__ = ["one_line"]


def one_line(exc: BaseException) -> str:
    """The error's message on one line (the rollback journals a command's last stderr line)."""
    if isinstance(exc, ReversiError):
        text = exc.message
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())

"""Undo windows: the moment an undo stops being possible (a refund window, a message that can be
deleted for a while, a transfer recalled within a day). Pure: the moment "now" is always given.

An entry says `undo_until:` (a template naming the moment, as the API returned it) or `undo_window:`
(a length, counted from `undo_from:`, a template naming a moment, else from when the call was
journaled). A moment is an RFC 3339 text (a time without an offset is UTC) or a number of seconds
since 1970 (as Stripe's `created` is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from reversi.core.json_values import JSONObject, JSONView
from reversi.core.references import ReferenceContext, resolve
from reversi.core.times import format_time, parse_time
from reversi.errors import WindowUnknown

__all__ = ["Closing", "UndoWindow", "WindowUnknown", "moment", "time_left"]


@dataclass(frozen=True)
class UndoWindow:
    """An entry's undo window.

    Attributes:
        until: A template naming the moment the undo stops being possible.
        length: How long the undo stays possible, from `start`.
        start: A template naming the moment `length` counts from; None: when the call was journaled.
    """

    until: JSONView = None
    length: timedelta | None = None
    start: JSONView = None

    @property
    def written(self) -> str:
        """The template the window's moment comes from, as written (for messages)."""
        template = self.until if self.length is None else self.start
        return template if isinstance(template, str) else "the call's time" if template is None else "its form"

    def closes_at(self, ctx: ReferenceContext, journaled_at: str) -> datetime:
        """When the window of one call closes.

        Raises:
            MissingReference: a template names nothing.
            WindowUnknown: a template names something that is no moment.
        """
        if self.length is None:
            return moment(resolve(self.until, ctx))
        start = moment(resolve(self.start, ctx)) if self.start is not None else parse_time(journaled_at)
        try:
            return start + self.length
        except OverflowError:
            raise WindowUnknown(f"{format_time(start)} plus the window is past the calendar") from None


@dataclass(frozen=True)
class Closing:
    """A standing step whose undo window closes soon: where, when (RFC 3339), and how long is left."""

    run_id: str
    step: int
    tool: str
    closes: str
    left: str

    def to_dict(self) -> JSONObject:
        return {"run_id": self.run_id, "step": self.step, "tool": self.tool, "closes": self.closes, "left": self.left}


def moment(value: JSONView) -> datetime:
    """A moment an API gave: an RFC 3339 text, or seconds since 1970.

    Raises:
        WindowUnknown: neither.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise WindowUnknown("not a finite number of seconds")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise WindowUnknown("a number of seconds since 1970 past the calendar's edge") from None
    if isinstance(value, str):
        try:
            found = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:  # the value is not quoted: it is the agent's, and may hold anything
            raise WindowUnknown("not an RFC 3339 time") from None
        try:
            return found.astimezone(UTC) if found.tzinfo is not None else found.replace(tzinfo=UTC)
        except OverflowError:
            raise WindowUnknown("a time past the calendar's edge") from None
    raise WindowUnknown(f"expected a time (RFC 3339 text or seconds since 1970), got {type(value).__name__}")


def time_left(closes: datetime, now: datetime) -> str:
    """How long until `closes`, in its two largest units: `3d 4h`, `5h 2m`, `12m`, `40s`."""
    seconds = max(0, int((closes - now).total_seconds()))
    parts = [(seconds // 86_400, "d"), (seconds % 86_400 // 3_600, "h"), (seconds % 3_600 // 60, "m"),
             (seconds % 60, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0s"

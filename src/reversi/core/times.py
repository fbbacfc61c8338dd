"""The ledger's one form of a moment (UTC, RFC 3339, `Z`), and reading the times people type. Pure: no I/O."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from reversi.errors import BadInput

_DURATION = re.compile(r"(\d+)([smhdw])", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def format_time(moment: datetime) -> str:
    """The ledger's own form: UTC, RFC 3339, microseconds, `Z`."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(at: str) -> datetime:
    """A moment the ledger wrote (`format_time`'s form) as a datetime."""
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """A span of time people type: a whole number and a unit, `30s`, `15m`, `12h`, `90d` or `2w`.

    Raises:
        BadInput: not that form, or longer than `datetime` can count (the message names `what`).
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise BadInput(f"{what} {_shown(text)}: expected a duration like 90d, 12h or 30m")
    try:
        return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    except (OverflowError, ValueError):  # ValueError: more digits than `int` reads from text
        raise BadInput(f"{what} {_shown(text)}: too long to be a duration") from None


def parse_since(text: str, now: datetime | None = None, *, what: str = "since") -> str:
    """A moment as the ledger writes it, from a duration ago (`30m`, `2h`, `7d`) or an RFC 3339 date or time.

    Raises:
        BadInput: neither form (the message names the value as `what`: a flag, a query parameter).
    """
    match = _DURATION.fullmatch(text.strip())
    try:
        if match:
            ago = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
            return format_time((now or datetime.now(UTC)) - ago)
        try:
            moment = parse_time(text.strip())
        except ValueError:
            raise BadInput(
                f"{what} {_shown(text)}: expected a duration like 30m, 2h, 7d or a date like 2026-12-01"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return format_time(moment)
    except (OverflowError, ValueError):  # a duration or an offset that leaves the calendar
        raise BadInput(f"{what} {_shown(text)}: too far from now to be a date") from None


def _shown(text: str) -> str:
    """What was typed, as an error message quotes it: its first 40 characters, for a value of any size."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}..."

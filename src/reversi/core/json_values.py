"""Turning what callers hand us into plain JSON values, and digests of them. Pure: no I/O."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reversi.errors import BadInput


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(*parts: Any) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `parts`."""
    return hashlib.sha256(canonical(list(parts)).encode()).hexdigest()


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)  # pydantic models and the like
    if callable(dump):
        return dump(mode="json")
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def to_json(value: Any) -> Any:
    """A result as JSON: plain values as they are, models and objects by their fields, else their text."""
    return json.loads(json.dumps(value, default=_fallback))


def checked_arguments(args: Any, what: str = "arguments") -> Any:
    """Arguments must already be plain JSON (they are journaled and sent to compensators as they are).

    Raises:
        BadInput: the value cannot be written as JSON.
    """
    try:
        return json.loads(json.dumps(args, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{what} must be JSON values: {exc}") from exc

"""The retry policy of compensations, and the delay before each attempt. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from reversi.core.json_values import LooseJSON
from reversi.errors import BadInput

MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class Retry:
    """How often to try a compensation: `attempts` in all (1-10), backing off from `base_ms` to `max_ms`."""

    attempts: int = 1
    base_ms: int = 250
    max_ms: int = 10_000

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or not 1 <= self.attempts <= MAX_ATTEMPTS
        ):
            raise BadInput(
                f"retries must be a whole number of attempts from 1 to {MAX_ATTEMPTS}, got {self.attempts!r}"
            )
        for name in ("base_ms", "max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BadInput(f"{name} must be a whole number of milliseconds from 0, got {value!r}")

    @classmethod
    def of(cls, value: Retry | Mapping[str, LooseJSON] | None) -> Retry:
        """A policy from a `Retry`, a mapping of its fields (`{"attempts": 3, "base_ms": 100}`) or None
        (one attempt).

        Raises:
            BadInput: not one of those, an unknown field, or a value out of range.
        """
        if value is None:
            return cls()
        if isinstance(value, Retry):
            return value
        if not isinstance(value, Mapping):
            raise BadInput(f"retry must be a Retry or a mapping of attempts, base_ms and max_ms, got {value!r}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(map(str, value)) - set(known))
        if unknown:
            raise BadInput(f"retry: unknown field {unknown[0]!r} (known: {', '.join(known)})")
        return cls(**value)

    def delay_s(self, attempt: int, jitter: float) -> float:
        """Seconds to wait before attempt `attempt` (from 2): min(max, base * 2^(k-2)) scaled by `jitter`.

        `jitter` is a random factor in [0.5, 1.0] drawn by the caller.
        """
        if attempt < 2:
            return 0.0
        delay_ms: int = min(self.max_ms, self.base_ms * 2 ** (attempt - 2))
        return delay_ms * jitter / 1000

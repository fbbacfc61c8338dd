"""Crash safety measured: a witness of the downstream world, one checker of the invariants, a seeded
fault campaign that SIGKILLs every kind of Reversi process, and a state machine against a model.

`check(store_url, witness_dir)` is the reusable entry point (see `checker`)."""

from tests.reliability.checker import Violation, check

__all__ = ["Violation", "check"]

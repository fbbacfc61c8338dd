"""Which journaled call is being made, or undone, right now: context for a connector's seal. Pure.

While the SDK calls a tool's function for step S of run R (and while a connector server runs a call
the gateway journaled as that step), `current_call()` is (R, S), so a forward result can be sealed
to the step that made it. While an undo runs, `current_undo()` is the compensation tool and its
idempotency key, from which the step being undone can be checked: a sealed result reported again
in another step is then refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from reversi.core.json_values import JSONObject

__all__ = ["CALL_META_KEY", "COMPENSATION_META_KEY", "CONNECTORS_SERVER", "IDEMPOTENCY_META_KEY", "CallId", "Undo",
           "current_call", "current_undo", "making", "undoing"]

CALL_META_KEY = "reversi/call"  # the gateway's `_meta` to an upstream: {"run_id": ..., "step": ...}
# The gateway's `_meta` on an undo: the compensation's name as the run journaled it (`NAME.tool` where
# the gateway prefixes names), from which its idempotency key was made.
COMPENSATION_META_KEY = "reversi/compensation"
IDEMPOTENCY_META_KEY = "reversi/idempotency_key"  # a rollback's `_meta` on each compensation: its key
# The one server the gateway tells the step to (by its `serverInfo.name`): to every other upstream the
# gateway passes calls on as the agent sent them.
CONNECTORS_SERVER = "reversi-connectors"


@dataclass(frozen=True)
class CallId:
    """A recorded call: its run and step."""

    run_id: str
    step: int

    @classmethod
    def of(cls, value: object) -> CallId | None:
        """The call a `{"run_id", "step"}` object names (`_meta` `reversi/call`, a reader's `call`), if any."""
        if not isinstance(value, dict):
            return None
        run_id, step = value.get("run_id"), value.get("step")
        if not isinstance(run_id, str) or not isinstance(step, int) or isinstance(step, bool):
            return None
        return cls(run_id, step)

    def to_dict(self) -> JSONObject:
        return {"run_id": self.run_id, "step": self.step}


@dataclass(frozen=True)
class Undo:
    """A compensation being run: its tool and the idempotency key the rollback gave it."""

    tool: str
    idempotency_key: str


_call: ContextVar[CallId | None] = ContextVar("reversi_current_call", default=None)
_undo: ContextVar[Undo | None] = ContextVar("reversi_current_undo", default=None)


def current_call() -> CallId | None:
    """The recorded call being made in this context, if any."""
    return _call.get()


def current_undo() -> Undo | None:
    """The compensation being run in this context, if any."""
    return _undo.get()


@contextmanager
def making(run_id: str, step: int) -> Iterator[None]:
    """Within the block, `current_call()` is step `step` of run `run_id`."""
    token = _call.set(CallId(run_id, step))
    try:
        yield
    finally:
        _call.reset(token)


@contextmanager
def undoing(tool: str, idempotency_key: str) -> Iterator[None]:
    """Within the block, `current_undo()` is `tool` run with `idempotency_key`."""
    token = _undo.set(Undo(tool, idempotency_key))
    try:
        yield
    finally:
        _undo.reset(token)

"""Claude Code hooks: every tool call of a Claude Code session journaled in a run, and refused there
when a halt, the kill switch, a duplicate or an approval says so (`reversi hook`).

Claude Code runs a command hook with the event as JSON on stdin. `PreToolUse` journals the call as
`intended` before it runs (a refusal answers `permissionDecision: deny`, with the reason Claude
reads); `PostToolUse` journals its result, `PostToolUseFailure` its error. A session is one run,
`run_claude-<session id>`; the tool call id ties the outcome to its step. What Claude Code does with
a call stays its own business: this never allows a call Claude Code would have asked about.

If the call cannot be journaled before it runs (the store is down), the hook blocks it: exit 2, with
the reason on stderr, which Claude Code shows to Claude. Pure but for the ledger it is given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reversi.core.models import RUN_ID_RE
from reversi.engine.ledger import Ledger
from reversi.engine.run import Run
from reversi.errors import NotFound, Refused, ReversiError
from reversi.integrations._journal import plain_arguments, refusal_text, usable_call_id

__all__ = ["HookAnswer", "answer_hook", "run_id_of", "unjournaled"]

ACTOR = "claude-code"


@dataclass(frozen=True)
class HookAnswer:
    """What the hook command prints (`output`, as JSON, or nothing), its exit code, and its stderr."""

    output: dict[str, Any] | None = None
    exit_code: int = 0
    error: str = ""


def run_id_of(session_id: object) -> str:
    """The run of a Claude Code session: `run_claude-<session id>`, or a digest of an id that cannot be
    part of a run id (a session id comes from outside)."""
    found = f"run_claude-{session_id}" if isinstance(session_id, str) else ""
    if RUN_ID_RE.fullmatch(found):
        return found
    return "run_claude-" + hashlib.sha256(str(session_id).encode()).hexdigest()[:32]


def unjournaled(event: Mapping[str, Any], exc: ReversiError) -> HookAnswer:
    """The answer when the ledger cannot be reached at all: a call about to run is blocked (journal
    before acting); an outcome that cannot be journaled is said, and blocks nothing."""
    if event.get("hook_event_name") == "PreToolUse":
        return HookAnswer(exit_code=2, error=f"reversi: the call was not journaled, so it is blocked: {exc.message}")
    return HookAnswer(exit_code=1, error=f"reversi: could not journal the outcome: {exc.message}")


def answer_hook(ledger: Ledger, event: Mapping[str, Any]) -> HookAnswer:
    """Journal one hook event; what to answer Claude Code."""
    kind = event.get("hook_event_name")
    tool, call_id = event.get("tool_name"), usable_call_id(event.get("tool_use_id"))
    if kind not in ("PreToolUse", "PostToolUse", "PostToolUseFailure") or not isinstance(tool, str) or not tool:
        return HookAnswer()  # not a tool call this journals: say nothing, change nothing
    args = event.get("tool_input")
    args = plain_arguments(args) if isinstance(args, Mapping) else {}
    if kind == "PreToolUse":
        return _before(ledger, event, tool, args, call_id)
    try:
        run = ledger.get_run(run_id_of(event.get("session_id")))
        if call_id is None:
            raise NotFound("the event has no tool_use_id to find its step by")
        if kind == "PostToolUse":
            run.settle(call_id, result=event.get("tool_response"))
        else:
            run.settle(call_id, error=str(event.get("error") or "the tool call failed"))
    except ReversiError as exc:  # the call has run: say so, block nothing
        return unjournaled(event, exc)
    return HookAnswer()


def _session_run(ledger: Ledger, event: Mapping[str, Any]) -> Run:
    """The session's run, opened by its first call (continuing it on every call would journal a
    `run_continued` each time)."""
    run_id = run_id_of(event.get("session_id"))
    try:
        return ledger.get_run(run_id)
    except NotFound:
        return ledger.start_run(run_id, actor=ACTOR)


def _before(ledger: Ledger, event: Mapping[str, Any], tool: str, args: dict[str, Any],
            call_id: str | None) -> HookAnswer:
    try:
        run = _session_run(ledger, event)
        run.begin(tool, args, call_id=call_id)
    except Refused as refused:
        return HookAnswer({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                                  "permissionDecisionReason": refusal_text(refused.message)}})
    except ReversiError as exc:
        return unjournaled(event, exc)
    return HookAnswer()

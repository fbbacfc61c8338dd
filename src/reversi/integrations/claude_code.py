"""Claude Code hooks: every tool call of a Claude Code session journaled in a run, and refused there
when a halt, the kill switch, a duplicate or an approval says so (`reversi hook`).

Claude Code runs a command hook with the event as JSON on stdin. `PreToolUse` journals the call as
`intended` before it runs (a refusal answers `permissionDecision: deny`, with the reason Claude
reads); `PostToolUse` journals its result, `PostToolUseFailure` its error. A session is one run,
`run_claude-<session id>`; the tool call id ties the outcome to its step. What Claude Code does with
a call stays its own business: this never allows a call Claude Code would have asked about.

If the call cannot be journaled before it runs (the store is down), the hook blocks it: exit 2, with
the reason on stderr, which Claude Code shows to Claude.

With `files=True` (`reversi hook --files`), the files a call changes under the fs connector's root
are kept for the undo: before a `Write`, `Edit`, `MultiEdit` or `NotebookEdit`, the file it names;
before a `Bash` command, everything under the root (`reversi.connectors.fs_changes`). The state is
journaled as the step's `before`; after the call, what changed is sealed into its result (`files`),
which the fs connector's `fs.restore_changes` puts back in a rollback. A call whose files cannot be
kept (outside the root, too many) still runs, and its result says why (`files_unavailable`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from reversi.connectors import fs_changes
from reversi.connectors._fs_root import root_path
from reversi.core.calls import making
from reversi.core.json_values import JSONObject, LooseJSON
from reversi.core.models import RUN_ID_RE, StepState, StepStatus
from reversi.engine.ledger import Ledger
from reversi.engine.run import Run
from reversi.errors import BadArgument, NotFound, Refused, ReversiError
from reversi.integrations._journal import plain_arguments, refusal_text, usable_call_id

__all__ = ["HookAnswer", "answer_hook", "denial", "run_id_of", "unjournaled"]

ACTOR = "claude-code"
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
SHELL_TOOLS = frozenset({"Bash"})
_UNAVAILABLE = "files_unavailable"


@dataclass(frozen=True)
class HookAnswer:
    """What the hook command prints (`output`, as JSON, or nothing), its exit code, and its stderr."""

    output: JSONObject | None = None
    exit_code: int = 0
    error: str = ""


def run_id_of(session_id: object) -> str:
    """The run of a Claude Code session: `run_claude-<session id>`, or a digest of an id that cannot be
    part of a run id (a session id comes from outside)."""
    found = f"run_claude-{session_id}" if isinstance(session_id, str) else ""
    if RUN_ID_RE.fullmatch(found):
        return found
    return "run_claude-" + hashlib.sha256(str(session_id).encode()).hexdigest()[:32]


def unjournaled(event: Mapping[str, LooseJSON], exc: ReversiError) -> HookAnswer:
    """The answer when the ledger cannot be reached at all: a call about to run is blocked (journal
    before acting); an outcome that cannot be journaled is said, and blocks nothing."""
    if event.get("hook_event_name") == "PreToolUse":
        return HookAnswer(exit_code=2, error=f"reversi: the call was not journaled, so it is blocked: {exc.message}")
    return HookAnswer(exit_code=1, error=f"reversi: could not journal the outcome: {exc.message}")


def denial(reason: str) -> JSONObject:
    """The PreToolUse answer that denies the call, with the reason Claude reads."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def answer_hook(ledger: Ledger, event: Mapping[str, LooseJSON], *, files: bool = False) -> HookAnswer:
    """Journal one hook event; what to answer Claude Code. `files`: keep the files the call changes."""
    kind = event.get("hook_event_name")
    tool, call_id = event.get("tool_name"), usable_call_id(event.get("tool_use_id"))
    if kind not in ("PreToolUse", "PostToolUse", "PostToolUseFailure") or not isinstance(tool, str) or not tool:
        return HookAnswer()  # not a tool call this journals: say nothing, change nothing
    args = event.get("tool_input")
    args = plain_arguments(args) if isinstance(args, Mapping) else {}
    if kind == "PreToolUse":
        return _before(ledger, event, tool, args, call_id, files)
    try:
        run = ledger.get_run(run_id_of(event.get("session_id")))
        if call_id is None:
            raise NotFound("the event has no tool_use_id to find its step by")
        _settle(run, call_id, event, kind == "PostToolUse")
    except ReversiError as exc:  # the call has run: say so, block nothing
        return unjournaled(event, exc)
    return HookAnswer()


def _settle(run: Run, call_id: str, event: Mapping[str, LooseJSON], succeeded: bool) -> None:
    """Journal the outcome; with the files the call changed, when they were kept before it. A failed
    call that changed files took effect all the same: it is journaled succeeded, its error kept."""
    step = next((s for s in run.snapshot().steps if s.call_id == call_id and s.status is StepStatus.INTENDED), None)
    files = _files_after(run, step) if step is not None else None
    error = None if succeeded else str(event.get("error") or "the tool call failed")
    if files is None:
        run.settle(call_id, result=event.get("tool_response"), error=error)
    elif error is not None and not _changed_anything(files):
        run.settle(call_id, error=error)
    else:
        answer = {"response": event.get("tool_response")} if error is None else {"error": error}
        run.settle(call_id, result={**answer, **files})


def _changed_anything(files: Mapping[str, LooseJSON]) -> bool:
    """Whether what the call changed is anything at all: kept changes, or changes fs could not keep."""
    found = files.get("files") or {}
    return bool(found.get("changes") or found.get("unseen"))


def _files_after(run: Run, step: StepState) -> JSONObject | None:
    """What the step's call changed (`files`), or why it is not known (`files_unavailable`); None when
    nothing was kept before it."""
    before = step.before if step.has_before and isinstance(step.before, Mapping) else {}
    if _UNAVAILABLE in before:
        return {_UNAVAILABLE: before[_UNAVAILABLE]}
    if "files" not in before:
        return None
    try:
        with making(run.id, step.index):  # the seal binds the changes to this step
            return {"files": fs_changes.changes_since(before["files"])}
    except ReversiError as exc:
        return {_UNAVAILABLE: f"the files changed could not be read: {exc.message}"}


def _files_before(tool: str, args: Mapping[str, LooseJSON]) -> JSONObject | None:
    """The state of what the call may change, kept (`files`), or why it cannot be (`files_unavailable`);
    None for a tool that changes no files."""
    try:
        if tool in SHELL_TOOLS:
            return {"files": fs_changes.files_before()}
        if tool in FILE_TOOLS:
            return {"files": fs_changes.files_before([_relative(args.get(FILE_TOOLS[tool]))])}
    except ReversiError as exc:
        return {_UNAVAILABLE: exc.message}
    return None


def _relative(path: object) -> str:
    """A file path Claude Code gave (absolute), relative to the fs root.

    Raises:
        BadArgument: not a path under the root.
    """
    if not isinstance(path, str) or not path or "\0" in path:
        raise BadArgument("file_path", "the call names no file path")
    root = root_path()
    absolute = os.path.join(os.path.realpath(os.path.dirname(os.path.join(root, path))), os.path.basename(path))
    relative = os.path.relpath(absolute, root)
    if relative == "." or relative.startswith(".." + os.sep) or relative == "..":
        raise BadArgument("file_path", f"{path[:200]!r} is outside the folder whose files are kept ({root})")
    return relative


def _session_run(ledger: Ledger, event: Mapping[str, LooseJSON]) -> Run:
    """The session's run, opened by its first call (continuing it on every call would journal a
    `run_continued` each time)."""
    run_id = run_id_of(event.get("session_id"))
    try:
        return ledger.get_run(run_id)
    except NotFound:
        return ledger.start_run(run_id, actor=ACTOR)


def _before(ledger: Ledger, event: Mapping[str, LooseJSON], tool: str, args: JSONObject,
            call_id: str | None, files: bool) -> HookAnswer:
    kept = _files_before(tool, args) if files else None
    try:
        run = _session_run(ledger, event)
        if kept is None:
            run.begin(tool, args, call_id=call_id)
        else:
            run.begin(tool, args, call_id=call_id, before=kept)
    except Refused as refused:
        return HookAnswer(denial(refusal_text(refused.message)))
    except ReversiError as exc:
        return unjournaled(event, exc)
    return HookAnswer()

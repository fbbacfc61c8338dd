"""`reversi hook`, the command Claude Code runs as its PreToolUse / PostToolUse / PostToolUseFailure
hook (issue 29): each tool call of a session journaled in its run before it runs, its outcome after;
a refused call denied with the reason Claude reads; a call that cannot be journaled blocked (exit 2).
Events are the JSON Claude Code writes on the hook's stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import reversi

EXE = str(Path(sys.executable).with_name("reversi"))


def hook(db: str, event: dict[str, Any] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    text = event if isinstance(event, str) else json.dumps(event)
    return subprocess.run([EXE, "--db", db, "hook"], input=text, capture_output=True, text=True, cwd=cwd,
                          timeout=60, env=os.environ.copy())


def event(kind: str, tool_use_id: str = "toolu_1", **more: Any) -> dict[str, Any]:
    return {"session_id": "5f1c-aa", "transcript_path": "/tmp/t.jsonl", "cwd": "/work", "hook_event_name": kind,
            "tool_name": "Write", "tool_input": {"file_path": "/work/a.txt", "content": "alpha"},
            "tool_use_id": tool_use_id, **more}


def test_a_session_is_a_run_and_each_call_a_step_with_its_outcome(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    for sent in (event("PreToolUse"), event("PreToolUse", "toolu_2"),
                 event("PostToolUse", tool_response={"type": "create", "filePath": "/work/a.txt"}),
                 event("PostToolUseFailure", "toolu_2", error="disk full")):
        done = hook(db, sent, tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    with reversi.open(db) as ledger:
        run = ledger.get_run("run_claude-5f1c-aa")
        steps, kinds = run.steps(), [e.type for e in run.events()]
    assert kinds.count("run_opened") == 1 and "run_continued" not in kinds  # one run, opened once
    assert [(s.tool, s.call_id, s.status.value) for s in steps] == [("Write", "toolu_1", "succeeded"),
                                                                   ("Write", "toolu_2", "failed")]
    assert steps[0].result == {"type": "create", "filePath": "/work/a.txt"} and steps[1].error == "disk full"


def test_a_halted_call_is_denied_with_the_reason_and_nothing_else_happens(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        ledger.add_halt("repo frozen for the release", tool="Write")
    done = hook(db, event("PreToolUse"), tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    decision = json.loads(done.stdout)["hookSpecificOutput"]
    assert (decision["hookEventName"], decision["permissionDecision"]) == ("PreToolUse", "deny")
    assert "kill switch: repo frozen for the release" in decision["permissionDecisionReason"]
    with reversi.open(db) as ledger:
        run = ledger.get_run("run_claude-5f1c-aa")
        assert run.steps() == () and [e.type for e in run.events()][-1] == "refused"


def test_a_call_that_cannot_be_journaled_is_blocked_and_an_outcome_is_only_said(tmp_path: Path) -> None:
    unreachable = "postgresql://postgres@127.0.0.1:9/test?connect_timeout=3"
    blocked = hook(unreachable, event("PreToolUse"), tmp_path)
    assert blocked.returncode == 2 and blocked.stdout == ""
    assert blocked.stderr.startswith("reversi: the call was not journaled, so it is blocked:")
    said = hook(unreachable, event("PostToolUse", tool_response="ok"), tmp_path)
    assert said.returncode == 1 and said.stderr.startswith("reversi: could not journal the outcome:")


def test_hostile_events_are_taken_as_data(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    odd = event("PreToolUse", "x" * 500, session_id="../../etc\n\x1b[31m")
    assert hook(db, odd, tmp_path).returncode == 0
    with reversi.open(db) as ledger:
        (summary,) = ledger.list_runs()
        (step,) = ledger.get_run(summary.run.run_id).steps()
    assert summary.run.run_id.startswith("run_claude-") and "\x1b" not in summary.run.run_id
    assert step.call_id is None  # an id the journal cannot keep: the step stands without it
    assert hook(db, event("UserPromptSubmit", prompt="hi"), tmp_path).returncode == 0  # not a tool call
    for garbage in ("not json", "[1, 2]"):
        done = hook(db, garbage, tmp_path)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "hook event on stdin" in done.stderr

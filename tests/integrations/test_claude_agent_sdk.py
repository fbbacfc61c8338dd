"""The Claude Agent SDK's hooks (`reversi.integrations.claude_agent_sdk`), end to end: the real SDK
drives the real Claude Code CLI it bundles, against a fake of Anthropic's Messages API that scripts
the model (tests/integrations/fake_anthropic.py); the hooks journal each tool call of the session,
and a halt or a pending approval denies one with the reason the model then reads. The same CLI with
`reversi hook` as its command hooks journals the same way. Last, the callbacks alone, with the
inputs the SDK documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookMatcher,
    PostToolUseHookInput,
    PreToolUseHookInput,
    ResultMessage,
    query,
)
from tests.integrations.fake_anthropic import (
    FakeAnthropic,
    Text,
    ToolUse,
    Turn,
    bundled_cli,
    cli_environment,
    serving,
    tool_results,
)

import reversi
import reversi.manifests as reversi_manifests
from reversi.engine.async_ledger import AsyncLedger
from reversi.errors import StoreUnavailable
from reversi.integrations import claude_agent_sdk, claude_code
from reversi.integrations.claude_agent_sdk import hooks

DEADLINE_S = 180.0  # one short session of the real CLI takes a second or two; a loaded machine, longer
REVERSI = str(Path(sys.executable).with_name("reversi"))


@dataclass
class Session:
    """What one session of the real CLI left: its id, final text, and the fake model's view of it."""

    session_id: str
    result: str
    fake: FakeAnthropic
    stderr: list[str] = field(default_factory=list)

    def fed_back(self) -> list[dict[str, Any]]:
        """The tool results the model was sent after its first answer."""
        assert len(self.fake.main) >= 2, f"the CLI never answered the tool call: {self.stderr}"
        return tool_results(self.fake.main[1])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's working folder; nothing of this machine's Claude settings, keys or proxies leaks in
    (the SDK starts the CLI with this process's environment under its options' `env`)."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE")) or name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name)
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def run_session(project: Path, turns: list[Turn], **options: Any) -> Session:
    """One `query()` of the real SDK and CLI against the fake model scripted with `turns`."""
    fake = FakeAnthropic(turns=turns)
    stderr: list[str] = []

    async def converse(env: dict[str, str]) -> ResultMessage:
        settings = ClaudeAgentOptions(cwd=str(project), env=env, permission_mode="acceptEdits", setting_sources=[],
                                      stderr=stderr.append, **options)
        with anyio.fail_after(DEADLINE_S):
            results = [m async for m in query(prompt="do the task", options=settings) if isinstance(m, ResultMessage)]
        assert len(results) == 1, stderr
        return results[0]

    with serving(fake.app(), fake) as url:
        result = anyio.run(converse, cli_environment(url, project.parent / "home"))
    assert not result.is_error, (result, stderr)
    assert fake.unknown == [], "the CLI asked the fake for something it does not serve"
    return Session(result.session_id, str(result.result), fake, stderr)


def session_run(ledger: reversi.Ledger, session: Session) -> reversi.Run:
    return ledger.get_run(f"run_claude-{session.session_id}")


def test_a_write_and_a_bash_command_are_journaled_before_they_run_and_settled_after(
        tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool, bool]] = []  # each event, and whether the files existed when it was journaled

    def answer_hook(ledger: reversi.Ledger, event: dict[str, Any], **options: Any) -> claude_code.HookAnswer:
        answer = claude_code.answer_hook(ledger, event, **options)
        seen.append((event["hook_event_name"], (project / "a.txt").exists(), (project / "f.txt").exists()))
        return answer

    monkeypatch.setattr(claude_agent_sdk, "answer_hook", answer_hook)
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        session = run_session(project, [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "alpha"}),
                                        ToolUse("Bash", {"command": "echo hi > f.txt", "description": "write f"})],
                              hooks=hooks(ledger), allowed_tools=["Bash"])
        run = session_run(ledger, session)
        steps, kinds = run.steps(), [e.type for e in run.events()]
    assert seen == [("PreToolUse", False, False), ("PostToolUse", True, False),
                    ("PreToolUse", True, False), ("PostToolUse", True, True)]
    assert (project / "a.txt").read_text() == "alpha" and (project / "f.txt").read_text() == "hi\n"
    assert [(s.tool, s.call_id, s.status.value) for s in steps] == [("Write", "toolu_fake_0_0", "succeeded"),
                                                                   ("Bash", "toolu_fake_1_0", "succeeded")]
    assert steps[0].args == {"file_path": str(project / "a.txt"), "content": "alpha"}
    assert steps[0].result["type"] == "create" and steps[1].result["interrupted"] is False
    assert run.actor == "claude-code" and kinds.count("run_opened") == 1
    assert [r["tool_use_id"] for r in session.fed_back()] == ["toolu_fake_0_0"] and session.result == "Done."


def test_a_halted_call_is_denied_not_run_and_the_model_reads_why(tmp_path: Path, project: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        ledger.add_halt("repo frozen for the release", tool="Write")
        session = run_session(project, [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "alpha"})],
                              hooks=hooks(ledger))
        run = session_run(ledger, session)
        assert run.steps() == () and [e.type for e in run.events()][-1] == "refused"
    assert not (project / "a.txt").exists()
    (answer,) = session.fed_back()
    assert answer["tool_use_id"] == "toolu_fake_0_0" and answer["is_error"] is True
    assert "Reversi refused this call, nothing was done" in answer["content"]
    assert "kill switch: repo frozen for the release" in answer["content"]


def test_a_call_that_needs_an_approval_is_denied_while_it_waits(tmp_path: Path, project: Path) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text("version: 1\ntools:\n  Bash:\n    requires_approval: true\n")
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}", manifests=[str(manifest)]) as ledger:
        session = run_session(project, [ToolUse("Bash", {"command": "echo hi > f.txt"})],
                              hooks=hooks(AsyncLedger(ledger)), allowed_tools=["Bash"])
        (pending,) = ledger.approvals(status="pending")
    assert not (project / "f.txt").exists()
    (answer,) = session.fed_back()
    assert answer["is_error"] is True and f"approval required: {pending.approval_id}" in answer["content"]


def test_a_failed_call_is_journaled_with_its_error(tmp_path: Path, project: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        session = run_session(project, [ToolUse("Bash", {"command": "echo broken >&2; exit 3"})],
                              hooks=hooks(ledger), allowed_tools=["Bash"])
        (step,) = session_run(ledger, session).steps()
    assert (step.tool, step.status.value) == ("Bash", "failed") and "broken" in str(step.error)


def test_a_callback_that_fails_blocks_the_call(tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ledger: reversi.Ledger, event: dict[str, Any], **_: Any) -> claude_code.HookAnswer:
        raise RuntimeError("a bug in the journal")

    monkeypatch.setattr(claude_agent_sdk, "answer_hook", broken)
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        session = run_session(project, [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "alpha"})],
                              hooks=hooks(ledger))
    assert not (project / "a.txt").exists()  # on_failure="block": the CLI honours it, or the SDK would not start
    (answer,) = session.fed_back()
    assert answer["is_error"] is True


def test_a_journal_that_does_not_answer_in_time_blocks_the_call(
        tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    released = threading.Event()

    def stuck(ledger: reversi.Ledger, event: dict[str, Any], **_: Any) -> claude_code.HookAnswer:
        released.wait(DEADLINE_S)  # a store that keeps the write lock past the hook's timeout
        return claude_code.HookAnswer()

    monkeypatch.setattr(claude_agent_sdk, "answer_hook", stuck)
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        try:
            session = run_session(project, [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "a"})],
                                  hooks=hooks(ledger, timeout=1))
        finally:
            released.set()
    assert not (project / "a.txt").exists()
    (answer,) = session.fed_back()
    assert answer["is_error"] is True and "timeout" in answer["content"]


def test_what_the_real_cli_writes_edits_and_runs_is_rolled_back_byte_for_byte(
        tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hooks(files=True)`: the files the CLI's own Write, Edit and Bash change are kept, and a rollback with
    the fs connector (the shipped `claude-code` manifest) puts the project back as it was."""
    monkeypatch.setenv("REVERSI_FS_ROOT", str(project))
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "s" * 40)
    (project / "notes.md").write_text("# notes\nkeep me\n")
    (project / "old.txt").write_text("old")
    start = {p.name: p.read_bytes() for p in project.iterdir()}
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with reversi.open(db) as ledger:
        session = run_session(project, [
            ToolUse("Write", {"file_path": str(project / "new.md"), "content": "fresh"}),
            ToolUse("Edit", {"file_path": str(project / "notes.md"), "old_string": "keep me", "new_string": "gone"}),
            ToolUse("Bash", {"command": "rm old.txt && mkdir out && echo hi > out/f.txt", "description": "tidy"}),
        ], hooks=hooks(ledger, files=True), allowed_tools=["Bash"])
        steps = session_run(ledger, session).steps()
    assert [(s.tool, s.status.value) for s in steps] == [("Write", "succeeded"), ("Edit", "succeeded"),
                                                        ("Bash", "succeeded")]
    assert (project / "notes.md").read_text() == "# notes\ngone\n" and not (project / "old.txt").exists()
    connectors = str(Path(sys.executable).with_name("reversi-connectors"))
    done = subprocess.run([REVERSI, "--db", db, "rollback", f"run_claude-{session.session_id}", "--json",
                           "-m", str(reversi_manifests.path("claude-code")),
                           "--compensator-cmd", f"{connectors} compensate", "--reader-cmd", f"{connectors} read"],
                          capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["compensated"] == [2, 1, 0]
    assert {p.name: p.read_bytes() for p in project.iterdir()} == start


def test_parallel_calls_of_one_answer_open_the_run_once(tmp_path: Path, project: Path) -> None:
    writes = tuple(ToolUse("Write", {"file_path": str(project / f"{n}.txt"), "content": n}) for n in ("a", "b"))
    with reversi.open(f"sqlite:///{tmp_path / 'r.db'}") as ledger:
        session = run_session(project, [writes], hooks=hooks(ledger))
        run = session_run(ledger, session)
        steps, kinds = run.steps(), [e.type for e in run.events()]
    assert sorted((s.call_id, s.status.value) for s in steps) == [("toolu_fake_0_0", "succeeded"),
                                                                  ("toolu_fake_0_1", "succeeded")]
    assert kinds.count("run_opened") == 1 and (project / "a.txt").exists() and (project / "b.txt").exists()


def test_claude_p_with_reversi_hook_as_its_command_hooks_journals_the_same_way(tmp_path: Path, project: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    command = [{"type": "command", "command": f"{REVERSI} --db {db} hook"}]
    settings = {"hooks": {e: [{"matcher": "*", "hooks": command}] for e in claude_agent_sdk.EVENTS}}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    with reversi.open(db) as ledger:
        ledger.add_halt("no shell today", tool="Bash")
    fake = FakeAnthropic(turns=[(ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "alpha"}),
                                 ToolUse("Bash", {"command": "echo hi > f.txt"}))])
    with serving(fake.app(), fake) as url:
        done = subprocess.run([str(bundled_cli()), "-p", "do the task", "--output-format", "json",
                               "--permission-mode", "acceptEdits", "--allowedTools", "Bash"],
                              cwd=project, env=cli_environment(url, tmp_path / "home"), capture_output=True,
                              text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    with reversi.open(db) as ledger:
        steps = ledger.get_run(f"run_claude-{json.loads(done.stdout)['session_id']}").steps()
    assert [(s.tool, s.call_id, s.status.value) for s in steps] == [("Write", "toolu_fake_0_0", "succeeded")]
    assert (project / "a.txt").exists() and not (project / "f.txt").exists()
    denied = {r["tool_use_id"]: r for r in tool_results(fake.main[1])}["toolu_fake_0_1"]
    assert denied["is_error"] is True and "kill switch: no shell today" in denied["content"]


# --- the callbacks alone, with the SDK's documented input shapes ---------------------------------------------


def pre(tool_use_id: str = "toolu_1") -> PreToolUseHookInput:
    return {"session_id": "5f1c-aa", "transcript_path": "/tmp/t.jsonl", "cwd": "/work", "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_input": {"file_path": "/work/a.txt", "content": "alpha"},
            "tool_use_id": tool_use_id}


def post(tool_use_id: str = "toolu_1") -> PostToolUseHookInput:
    return {"session_id": "5f1c-aa", "transcript_path": "/tmp/t.jsonl", "cwd": "/work",
            "hook_event_name": "PostToolUse", "tool_name": "Write",
            "tool_input": {"file_path": "/work/a.txt", "content": "alpha"}, "tool_response": {"type": "create"},
            "tool_use_id": tool_use_id}


def call(matchers: dict[Any, list[HookMatcher]], event: Any, tool_use_id: str | None = "toolu_1") -> Any:
    (matcher,) = matchers[event["hook_event_name"]]
    (callback,) = matcher.hooks
    context: HookContext = {"signal": None}
    return anyio.run(callback, event, tool_use_id, context)


def test_the_callbacks_journal_off_the_event_loop_and_fail_closed_before_a_call(
        sqlite_ledger: reversi.Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    matchers = hooks(sqlite_ledger, matcher="Write|Edit", timeout=30)
    assert [(m.matcher, m.timeout, m.on_failure) for e in claude_agent_sdk.EVENTS for m in matchers[e]] == [
        ("Write|Edit", 30, "block"), ("Write|Edit", 30, None), ("Write|Edit", 30, None)]
    threads: list[int] = []

    def answer_hook(*args: Any, **options: Any) -> Any:
        threads.append(threading.get_ident())
        return claude_code.answer_hook(*args, **options)

    monkeypatch.setattr(claude_agent_sdk, "answer_hook", answer_hook)
    assert call(matchers, pre()) == {} and call(matchers, post()) == {}
    assert threading.get_ident() not in threads and len(threads) == 2
    (step,) = sqlite_ledger.get_run("run_claude-5f1c-aa").steps()
    assert (step.call_id, step.status.value, step.result) == ("toolu_1", "succeeded", {"type": "create"})


def test_a_call_that_cannot_be_journaled_is_denied_and_an_outcome_only_said(
        sqlite_ledger: reversi.Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the store is down")

    monkeypatch.setattr(sqlite_ledger, "get_run", down)
    monkeypatch.setattr(sqlite_ledger, "start_run", down)
    matchers = hooks(sqlite_ledger)
    decision = call(matchers, pre())["hookSpecificOutput"]
    assert (decision["permissionDecision"], decision["permissionDecisionReason"]) == (
        "deny", "reversi: the call was not journaled, so it is blocked: the store is down")
    assert call(matchers, post()) == {"systemMessage": "reversi: could not journal the outcome: the store is down"}


def test_the_tool_use_id_argument_stands_in_when_the_input_lacks_one(sqlite_ledger: reversi.Ledger) -> None:
    event: dict[str, Any] = {**pre(), "tool_use_id": None}
    del event["tool_use_id"]
    call(hooks(sqlite_ledger), event, "toolu_9")
    (step,) = sqlite_ledger.get_run("run_claude-5f1c-aa").steps()
    assert step.call_id == "toolu_9"


def test_the_fake_model_speaks_the_messages_api_as_anthropics_client_reads_it() -> None:
    fake = FakeAnthropic(turns=[(Text("writing"), ToolUse("Write", {"file_path": "/a", "content": "x"}, "toolu_9"))])
    ask: dict[str, Any] = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "go"}],
                           "tools": [{"name": "Write", "input_schema": {"type": "object"}}]}
    with serving(fake.app(), fake) as url:
        client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        whole = client.messages.create(**ask)
        with client.messages.stream(**ask) as stream:
            streamed = stream.get_final_message()
        counted = client.messages.count_tokens(model="claude-x", messages=ask["messages"])
        aside = client.messages.create(**{**ask, "tools": []})
    for message in (whole, streamed):
        assert message.stop_reason == "tool_use" and [b.type for b in message.content] == ["text", "tool_use"]
        text, tool_use = message.content
        assert isinstance(text, anthropic.types.TextBlock) and text.text == "writing"
        assert isinstance(tool_use, anthropic.types.ToolUseBlock)
        assert (tool_use.id, tool_use.name, tool_use.input) == ("toolu_9", "Write", {"file_path": "/a", "content": "x"})
    assert counted.input_tokens > 0 and aside.stop_reason == "end_turn" and len(fake.main) == 2

"""Capture before the call through the SDK: `run.call(capture=...)` reads first and journals the answer
with `intended`; a failed capture refuses the call; `run.begin(before=...)` takes the caller's own read;
the rollback undoes and checks with `$before`, and an expected error answer (`$error`) is a match."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.errors import CaptureFailed, ToolAnsweredError

MANIFEST = """\
version: 1
tools:
  files.write:
    read_when: {"$args.dryRun": true}
    capture: {tool: files.read, args: {path: "$args.path"}, absent_on_error: ENOENT}
    compensation:
      tool: files.write
      args: {path: "$args.path", content: "$before.content"}
    verification:
      tool: files.read
      args: {path: "$args.path"}
      expect: {content: "$before.content"}
  files.move:
    compensation: {tool: files.move, args: {source: "$args.to", to: "$args.source"}}
    verification: {tool: files.read, args: {path: "$args.to"}, expect: {$error: ENOENT}}
"""


class Files:
    """A dictionary of files, with a read that answers like an MCP server (an error for a missing one)."""

    def __init__(self, **files: str) -> None:
        self.files = dict(files)
        self.reads: list[Any] = []

    def read(self, tool: str, arguments: dict[str, Any]) -> dict[str, str]:
        self.reads.append((tool, arguments))
        if arguments["path"] not in self.files:
            raise ToolAnsweredError(f"ENOENT: no such file {arguments['path']}")
        return {"content": self.files[arguments["path"]]}

    def write(self, path: str, content: str, dryRun: bool = False) -> str:
        if not dryRun:
            self.files[path] = content
        return "ok"

    def move(self, source: str, to: str) -> str:
        self.files[to] = self.files.pop(source)
        return "moved"

    def undo(self, call: dict[str, Any]) -> Any:
        args = call["args"]
        return self.write(**args) if call["tool"] == "files.write" else self.move(**args)


@pytest.fixture
def ledger(db_url: str, tmp_path: Path) -> Any:
    path = tmp_path / "files.yaml"
    path.write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(path)]) as opened:
        yield opened


def test_a_call_is_captured_first_and_the_rollback_writes_back_what_was_read(ledger: reversi.Ledger) -> None:
    files = Files(a="alpha beta")
    run = ledger.start_run()
    run.call("files.write", {"path": "a", "content": "gamma"}, files.write, capture=files.read)
    run.call("files.write", {"path": "a", "content": "x", "dryRun": True}, files.write, capture=files.read)
    run.call("files.move", {"source": "a", "to": "b"}, files.move, capture=files.read)
    assert files.reads == [("files.read", {"path": "a"})]  # neither the dry run nor the move reads first
    intended = next(e for e in run.events() if e.type == "intended")
    assert intended.data["before"] == {"content": "alpha beta"}
    assert intended.data["capture"] == {"tool": "files.read", "args": {"path": "a"}}
    report = run.rollback(files.undo, verifier=files.read)
    assert report.complete and report.compensated == [2, 0] and report.skipped == [1]
    assert files.files == {"a": "alpha beta"}
    verified = [e.data for e in run.events() if e.type == "verified"]
    assert verified[0]["error"].startswith("ENOENT") and verified[1]["answer"] == {"content": "alpha beta"}


def test_a_file_that_was_not_there_is_said_to_stay(ledger: reversi.Ledger) -> None:
    files = Files()
    run = ledger.start_run()
    run.call("files.write", {"path": "new", "content": "fresh"}, files.write, capture=files.read)
    assert run.steps()[0].before_absent == "ENOENT: no such file new"
    [action] = run.plan().actions
    assert action.kind.value == "unrecoverable" and "(the capture found nothing before the call: ENOENT" in str(
        action.reason)


def test_a_capture_that_fails_refuses_the_call_and_the_call_is_not_made(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    made: list[str] = []

    def unreadable(tool: str, arguments: Any) -> Any:
        raise ToolAnsweredError("EACCES: permission denied")

    with pytest.raises(CaptureFailed, match=r"capture files\.read answered an error: EACCES: permission denied"):
        run.call("files.write", {"path": "a", "content": "x"}, lambda **kw: made.append("called"), capture=unreadable)
    with pytest.raises(CaptureFailed, match=r"capture files.read before files.write: \$args.path names nothing"):
        run.call("files.write", {"content": "x"}, lambda **kw: made.append("called"), capture=unreadable)
    assert made == [] and run.steps() == ()
    refused = [e.data for e in run.events() if e.type == "refused"]
    assert [r["code"] for r in refused] == ["capture_failed", "capture_failed"]
    assert refused[0]["args"] == {"path": "a", "content": "x"}


def test_a_call_a_halt_will_refuse_reads_nothing_first(ledger: reversi.Ledger) -> None:
    files = Files(a="alpha")
    run = ledger.start_run(actor="agent")
    ledger.add_halt("investigating", tool="files.*")
    with pytest.raises(reversi.errors.Halted, match="investigating"):
        run.call("files.write", {"path": "a", "content": "x"}, files.write, capture=files.read)
    assert files.reads == [] and files.files == {"a": "alpha"}
    assert [e.data["code"] for e in run.events() if e.type == "refused"] == ["halted"]


def test_an_async_capture_works_with_acall(ledger: reversi.Ledger) -> None:
    files = Files(a="one")

    async def read(tool: str, arguments: Any) -> Any:
        await asyncio.sleep(0)
        return files.read(tool, arguments)

    async def session() -> None:
        run = ledger.start_run(run_id="run_async")
        await run.acall("files.write", {"path": "a", "content": "two"}, files.write, capture=read)

    asyncio.run(session())
    assert ledger.get_run("run_async").steps()[0].before == {"content": "one"}


def test_a_caller_may_hand_in_its_own_read_and_without_one_the_plan_says_nothing_was_captured(
    ledger: reversi.Ledger,
) -> None:
    run = ledger.start_run()
    with run.step("files.write", {"path": "a", "content": "b"}, before={"content": "a"}) as step:
        step.succeeded("ok")
    run.call("files.write", {"path": "c", "content": "d"}, Files().write)  # no capture=, no reader command
    first, second = sorted(run.plan().actions, key=lambda a: a.step)
    assert first.compensation is not None and first.compensation.args == {"path": "a", "content": "a"}
    assert second.reason == ("compensation arguments unavailable: $before.content "
                             "(nothing was captured before the call)")

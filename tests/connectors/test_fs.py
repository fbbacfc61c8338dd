"""The fs connector: its tools as plain functions, and a run rolled back by the real CLI with it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.connectors.conftest import Done, compensation_calls, connectors_cli, files_under, reversi_cli

import reversi
from reversi.connectors import BadArgument, ChangedSince, _snapshots, fs

MANIFEST = fs.CONNECTOR.manifest_path()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with files that were there before the run and must survive it."""
    root = tmp_path / "world"
    (root / "docs").mkdir(parents=True)
    for name, data, mode in [("keep.txt", b"kept\n", 0o600), ("edit.txt", b"first draft\n", 0o640),
                             ("gone.bin", bytes(range(256)), 0o755), ("docs/moveme.txt", b"move me\n", 0o644)]:
        (root / name).write_bytes(data)
        (root / name).chmod(mode)
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    return root


def _agent_run(ledger: reversi.Ledger) -> str:
    run = ledger.start_run(actor="file-agent")
    run.call("fs.write_file", {"path": "edit.txt", "content": "second draft\n"}, fs.write_file)
    run.call("fs.write_file", {"path": "new.txt", "content": "brand new\n"}, fs.write_file)
    run.call("fs.write_file", {"path": "edit.txt", "content_base64": "AAEC"}, fs.write_file)
    run.call("fs.delete", {"path": "gone.bin"}, fs.delete)
    run.call("fs.make_dir", {"path": "archive"}, fs.make_dir)
    run.call("fs.move", {"source": "docs/moveme.txt", "destination": "archive/moved.txt"}, fs.move)
    run.call("fs.write_file", {"path": "archive/notes.txt", "content": "in the new folder"}, fs.write_file)
    return run.id


def test_a_rollback_through_the_cli_gives_back_every_byte_and_mode(
    db_url: str, world: Path, rollback: Callable[..., Done]
) -> None:
    before = files_under(world)
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger)
    assert files_under(world) != before

    done = rollback(run_id, MANIFEST)

    assert done.code == 0, done.err
    report = done.json()
    assert report["complete"] and report["compensated"] == [6, 5, 4, 3, 2, 1, 0]
    assert files_under(world) == before


def test_a_file_changed_since_the_step_is_not_clobbered_and_the_step_stays_standing(
    db_url: str, world: Path, rollback: Callable[..., Done], plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run = ledger.start_run()
        run.call("fs.write_file", {"path": "edit.txt", "content": "agent's\n"}, fs.write_file)
        run.call("fs.make_dir", {"path": "out"}, fs.make_dir)
    (world / "edit.txt").write_text("a person's edit\n")
    (world / "out" / "report.txt").write_text("someone put this here")

    done = rollback(run.id, MANIFEST)

    assert done.code == 2
    failed = {f["step"]: f["error"] for f in done.json()["failed"]}
    assert failed[1] == "changed since step 1: out is no longer empty: it holds 1 entry"
    assert failed[0].startswith("changed since step 0: edit.txt now has sha256 ")
    assert (world / "edit.txt").read_text() == "a person's edit\n"
    actions = {a["step"]: a for a in plan(run.id, MANIFEST).json()["actions"]}
    assert actions[0]["kind"] == actions[1]["kind"] == "compensate"


def test_each_compensation_repeated_with_its_key_changes_nothing_and_answers_the_same(
    db_url: str, world: Path, plan: Callable[[str, Path], Done]
) -> None:
    before = files_under(world)
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run_id = _agent_run(ledger)
    calls = compensation_calls(plan(run_id, MANIFEST).json())
    assert {c["tool"] for c in calls} == {"fs.restore", "fs.move_back", "fs.remove_dir"}

    for call in calls:  # newest first, as a rollback runs them; each one twice, as a retry would
        first = connectors_cli("compensate", stdin=json.dumps(call))
        assert first.code == 0, first.err
        undone = files_under(world)
        again = connectors_cli("compensate", stdin=json.dumps({**call, "attempt": 2}))
        assert again.code == 0, again.err
        assert json.loads(again.out) == json.loads(first.out)
        assert files_under(world) == undone
    assert files_under(world) == before


def test_a_compensation_run_twice_before_anyone_reads_the_answer_does_the_undo_once(world: Path) -> None:
    written = fs.write_file(path="keep.txt", content="overwritten")
    first = fs.restore(written, step=0)
    (world / "keep.txt").chmod(0o600)  # unchanged: a second run must neither fail nor touch it
    assert fs.restore(written, step=0) == first
    assert (world / "keep.txt").read_bytes() == b"kept\n"


@pytest.mark.parametrize("path", ["../outside.txt", "docs/../../outside.txt", "docs/../keep.txt", "/etc/passwd", "",
                                  ".", "./keep.txt", "docs//moveme.txt", "docs/", "a\0b", "x" * 256,
                                  "x" * 300 + "/a", "d/" * 2100 + "x", "\ud800", "a\udcffb"])
def test_a_path_that_is_not_plainly_under_the_root_is_refused(world: Path, path: str) -> None:
    before = files_under(world)
    with pytest.raises(BadArgument, match="bad argument path: "):
        fs.write_file(path=path, content="x")
    assert not (world.parent / "outside.txt").exists()
    assert files_under(world) == before


def test_a_symbolic_link_anywhere_in_a_path_is_refused_even_one_that_stays_in_the_root(
    world: Path, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (world / "link").symlink_to(tmp_path / "elsewhere")
    (world / "docs-link").symlink_to(world / "docs")
    (world / "passwd").symlink_to("/etc/passwd")
    (world / "keep-link").symlink_to(world / "keep.txt")
    refused: list[tuple[Callable[..., Any], dict[str, str], str]] = [
        (fs.write_file, {"path": "link/x.txt", "content": "x"}, "passes through the symbolic link 'link', which fs"),
        (fs.delete, {"path": "docs-link/moveme.txt"}, "passes through the symbolic link 'docs-link'"),
        (fs.delete, {"path": "passwd"}, "'passwd' is a symbolic link, which fs refuses, not a file"),
        (fs.write_file, {"path": "keep-link", "content": "through"}, "'keep-link' is a symbolic link"),
        (fs.move, {"source": "keep.txt", "destination": "link/keep.txt"}, "passes through the symbolic link 'link'"),
        (fs.stat, {"path": "keep-link"}, "'keep-link' is a symbolic link, which fs refuses"),
        (fs.stat, {"path": "link/anything"}, "passes through the symbolic link 'link'"),
    ]
    for call, arguments, problem in refused:
        with pytest.raises(BadArgument, match=problem):
            call(**arguments)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert (world / "keep.txt").read_bytes() == b"kept\n" and (world / "docs" / "moveme.txt").exists()


def test_the_connector_folder_is_out_of_the_agents_reach(tmp_path: Path) -> None:
    fs.write_file(path="a.txt", content="one")  # root and connector folder both default to the cwd
    written = fs.write_file(path="a.txt", content="two")
    blob = f".reversi/connectors/blobs/{written['before']['sha256']}"
    calls: list[tuple[Callable[..., Any], dict[str, str]]] = [
        (fs.write_file, {"path": blob, "content": "tampered"}), (fs.delete, {"path": blob}),
        (fs.write_file, {"path": ".reversi/connectors/seal.key", "content": "k" * 64}),
        (fs.move, {"source": "a.txt", "destination": ".reversi/connectors/blobs/x"}),
        (fs.make_dir, {"path": ".reversi/connectors/other"}), (fs.stat, {"path": blob})]
    for call, arguments in calls:
        with pytest.raises(BadArgument, match="inside the connector folder"):
            call(**arguments)
    assert (tmp_path / blob).read_bytes() == b"one"


def test_reversis_own_files_are_out_of_the_agents_reach(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root that holds the store, the configuration or a manifest: an agent cannot rewrite what judges it."""
    (world / ".reversi").mkdir()
    (world / ".reversi" / "reversi.db").write_bytes(b"the store")
    (world / "reversi.yaml").write_text("db: sqlite:///elsewhere.db\n")
    for name in ("store.db", "tools.yaml", "STOP", "http-tools.yaml", "team.yaml"):
        (world / name).write_text(f"{name}\n")
    monkeypatch.setenv("REVERSI_DB", f"sqlite:///{world / 'store.db'}")
    monkeypatch.setenv("REVERSI_MANIFEST", f"{tmp_path / 'nowhere.yaml'}:{world / 'tools.yaml'}")
    monkeypatch.setenv("REVERSI_KILL_FILE", str(world / "STOP"))
    monkeypatch.setenv("REVERSI_HTTP_TOOLS", str(world / "http-tools.yaml"))
    monkeypatch.setenv("REVERSI_CONFIG", str(world / "team.yaml"))
    before = files_under(world)
    refused = [".reversi/reversi.db", ".reversi/new.txt", "docs/.reversi/x", "reversi.yaml", "docs/reversi.yaml",
               "store.db", "store.db-wal", "store.db-journal", "tools.yaml", "STOP", "http-tools.yaml", "team.yaml"]
    for path in refused:
        calls: list[tuple[Callable[..., Any], dict[str, str]]]
        calls = [(fs.write_file, {"path": path, "content": "rewritten"}), (fs.delete, {"path": path}),
                 (fs.move, {"source": "keep.txt", "destination": path}),
                 (fs.move, {"source": path, "destination": "taken.txt"})]
        for call, arguments in calls:
            with pytest.raises(BadArgument, match="one of Reversi's own files, which fs tools never touch"):
                call(**arguments)
    with pytest.raises(BadArgument, match="one of Reversi's own files"):
        fs.make_dir(path=".reversi")
    assert files_under(world) == before
    assert fs.write_file(path="reversi.yaml.bak", content="a name that only starts alike")["after"]["exists"]


def test_each_result_is_sealed_and_its_snapshot_named_by_digest_in_the_connector_folder(world: Path) -> None:
    written = fs.write_file(path="gone.bin", content="replaced")
    assert written["root"] == str(world) and written["path"] == "gone.bin"
    assert written["before"]["snapshot"] == written["before"]["sha256"]
    assert (_snapshots.connector_dir() / "blobs" / written["before"]["sha256"]).read_bytes() == bytes(range(256))
    assert written["before"]["mode"] == "0755"
    assert written["reversi_seal"]["tool"] == "fs.write_file" and len(written["reversi_seal"]["mac"]) == 64


def test_an_undo_run_from_another_folder_needs_the_same_root_and_connector_folder(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = fs.delete(path="keep.txt")
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / ".reversi" / "connectors"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("REVERSI_FS_ROOT")
    with pytest.raises(BadArgument, match=f"the step acted in {world}; this connector's root is {elsewhere}$"):
        fs.restore(written, step=3)
    assert not (world / "keep.txt").exists()
    monkeypatch.setenv("REVERSI_FS_ROOT", str(world))
    fs.restore(written, step=3)
    assert (world / "keep.txt").read_bytes() == b"kept\n"
    assert oct((world / "keep.txt").stat().st_mode & 0o777) == "0o600"


def test_a_damaged_snapshot_is_refused_rather_than_written_back(world: Path) -> None:
    written = fs.delete(path="keep.txt")
    blob = _snapshots.connector_dir() / "blobs" / written["before"]["sha256"]
    blob.chmod(0o600)
    blob.write_bytes(b"not what was kept")
    with pytest.raises(reversi.errors.ReversiError, match="is damaged"):
        fs.restore(written)
    assert not (world / "keep.txt").exists()


def test_move_back_refuses_when_the_moved_file_was_edited_and_when_the_source_is_taken(world: Path) -> None:
    moved = fs.move(source="keep.txt", destination="kept.txt")
    (world / "keep.txt").write_text("someone took the name")
    with pytest.raises(ChangedSince, match=r"^changed since step 2: keep\.txt exists again"):
        fs.move_back(moved, step=2)
    (world / "keep.txt").unlink()
    (world / "kept.txt").write_text("edited")
    with pytest.raises(ChangedSince, match=r"kept\.txt now has sha256"):
        fs.move_back(moved, step=2)


def test_a_folder_turned_into_a_symbolic_link_since_the_step_stops_the_undo(world: Path, tmp_path: Path) -> None:
    written = fs.write_file(path="docs/new.txt", content="new")
    (world / "docs").rename(world / "docs-moved")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "new.txt").write_text("new")  # as the step left it, but outside the root
    (world / "docs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ChangedSince, match=r"^changed since step 5: 'docs/new\.txt' passes through the symbolic link"):
        fs.restore(written, step=5)
    assert (tmp_path / "elsewhere" / "new.txt").read_text() == "new"


def test_a_forward_call_without_a_usable_sealing_key_changes_nothing(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "too short")
    with pytest.raises(reversi.errors.ConfigError, match="REVERSI_CONNECTOR_KEY must be at least 32 characters"):
        fs.write_file(path="keep.txt", content="x")
    with pytest.raises(reversi.errors.ConfigError):
        fs.delete(path="keep.txt")
    assert (world / "keep.txt").read_bytes() == b"kept\n"


def test_stat_answers_for_files_folders_and_nothing(world: Path) -> None:
    assert fs.stat(path="keep.txt")["mode"] == "0600"
    assert fs.stat(path="docs")["type"] == "directory"
    assert fs.stat(path="nothing")["exists"] is False
    assert fs.stat(path="no/such/folder")["exists"] is False
    with pytest.raises(BadArgument, match=r"'keep\.txt' in 'keep\.txt/x' is not a folder"):
        fs.stat(path="keep.txt/x")


def test_bad_arguments_are_named_on_one_line_with_exit_1(world: Path) -> None:
    done = connectors_cli("read", stdin=json.dumps({"tool": "fs.stat", "arguments": {"path": 3}}))
    assert (done.code, done.err) == (1, "bad argument path: expected a string, got int\n")
    done = connectors_cli("read", stdin=json.dumps({"tool": "fs.stat", "arguments": {"pth": "x"}}))
    assert (done.code, done.err) == (1, "bad argument pth: fs.stat takes no such argument\n")
    done = connectors_cli("compensate", stdin=json.dumps({"tool": "fs.write_file", "args": {}}))
    assert done.code == 1 and done.err.startswith("unknown tool: fs.write_file (it is a forward tool")
    done = connectors_cli("compensate", stdin=json.dumps({"tool": "nope.undo", "args": {}}))
    assert (done.code, done.err) == (1, "unknown tool: nope.undo\n")
    with pytest.raises(BadArgument, match="give exactly one of content and content_base64"):
        fs.write_file(path="x", content="a", content_base64="YQ==")
    assert not os.path.exists(world / "x")


def test_the_shipped_manifest_passes_the_real_check() -> None:
    done = reversi_cli("manifest", "check", str(MANIFEST))
    assert done.code == 0 and done.out == "ok: 1 manifest file checked\n", done.out

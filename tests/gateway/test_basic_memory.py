"""The shipped basic-memory manifest in front of the real server (PyPI basic-memory, pinned, in a
virtualenv of its own): an agent creates, overwrites, edits, moves and deletes notes through
`reversi-gateway`, the operator rolls the run back, and the notes folder is the one before, byte for
byte; what the plan says stays (a folder delete), stays. Issue 28: alternatives, `$optional`, a
sequence of calls, conditional approval and text matchers, on a server no one here wrote."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.pinned import BASIC_MEMORY
from tests.gateway.test_shipped_manifests import World, _actions, _ok
from tests.server.conftest import wait_for

import reversi.manifests
from reversi.core.manifest_yaml import parse_manifest

pytestmark = pytest.mark.anyio
SETTLE_S = 60.0  # basic-memory answers before its file writes land: wait for the folder, never for a time


def _world(tmp_path: Path) -> tuple[World, Path]:
    notes = tmp_path / "notes"
    env = {"HOME": str(tmp_path / "home"), "BASIC_MEMORY_HOME": str(notes), "NO_COLOR": "1"}
    (tmp_path / "home").mkdir()
    return World(tmp_path, "basic-memory", BASIC_MEMORY.command("mcp"), env), notes


def _folder(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.md"))}


def _on_disk(root: Path, texts: dict[str, str]) -> dict[str, bytes]:
    """The notes folder once it holds exactly these files, each with its text."""
    def shown() -> dict[str, bytes] | None:
        found = _folder(root)
        return found if set(found) == set(texts) and all(texts[p].encode() in found[p] for p in texts) else None

    landed: dict[str, bytes] = wait_for(shown, f"the notes {sorted(texts)} on disk", timeout=SETTLE_S)
    return landed


def _restored(root: Path, wanted: dict[str, bytes]) -> dict[str, bytes]:
    """The notes folder once it is `wanted`, or as it is at the deadline (the caller's assertion shows
    what differs)."""
    deadline = time.monotonic() + SETTLE_S
    while (now := _folder(root)) != wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return now


async def _seed(world: World, notes: Path) -> dict[str, bytes]:
    """Notes that were there before the run: one whose file name is not its title."""
    async with world.reader() as client:
        for title, folder, text in (("Shopping List", "lists", "- milk\n- bread"), ("Ideas", "", "Fly.\n\n## Later"),
                                    ("Trip", "travel", "Pack light."), ("Old", "attic", "dust")):
            _ok(await client.call_tool("write_note", {"title": title, "content": text, "directory": folder,
                                                      "tags": ["seed"]}))
        _ok(await client.call_tool("move_note", {"identifier": "Trip", "destination_path": "travel/trip-2026.md"}))
        found = _ok(await client.call_tool("read_note", {"identifier": "Trip", "output_format": "json"}))
    assert found["result"]["file_path"] == "travel/trip-2026.md"
    return _on_disk(notes, {"lists/Shopping List.md": "- milk\n- bread", "Ideas.md": "Fly.\n\n## Later",
                            "travel/trip-2026.md": "Pack light.", "attic/Old.md": "dust"})


async def test_creates_overwrites_edits_moves_and_deletes_roll_back_byte_for_byte(tmp_path: Path) -> None:
    world, notes = _world(tmp_path)
    before = await _seed(world, notes)
    async with world.agent() as agent:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("write_note", {"title": "Groceries", "content": "- tea", "directory": "lists"}),  # created
            ("write_note", {"title": "Shopping List", "content": "- eggs", "directory": "lists", "overwrite": True}),
            ("edit_note", {"identifier": "Ideas", "operation": "append", "content": "- swim"}),
            ("move_note", {"identifier": "Ideas", "destination_path": "archive/Ideas.md"}),
            ("delete_note", {"identifier": "Trip"}),  # its file is not named after its title
            ("delete_note", {"identifier": "Old", "is_directory": False}),
        ]
        for tool, args in calls:
            _ok(await agent.call_tool(tool, args))
    _on_disk(notes, {"lists/Shopping List.md": "- eggs", "lists/Groceries.md": "- tea", "archive/Ideas.md": "- swim"})
    plan, report = await world.roll_back()
    actions = _actions(plan)
    assert [actions[s]["kind"] for s in range(6)] == ["compensate"] * 6, plan
    assert (actions[0]["alternative"], actions[0]["compensation_tool"]) == ("created", "delete_note")
    assert (actions[1]["alternative"], actions[1]["compensation_tool"]) == ("updated", "write_note")
    assert actions[4]["alternative"] == "renamed note"
    assert actions[4]["then"][0]["tool"] == "move_note"
    assert actions[4]["then"][0]["args"]["destination_path"] == "travel/trip-2026.md"
    assert actions[5]["alternative"] == "note" and "then" not in actions[5]
    assert report["complete"] is True and sorted(report["compensated"]) == list(range(6)), report
    assert _restored(notes, before) == before


async def test_a_folder_delete_waits_for_a_person_and_the_plan_says_it_stays(tmp_path: Path) -> None:
    world, notes = _world(tmp_path)
    await _seed(world, notes)
    async with world.agent() as agent:
        refused = await agent.call_tool("delete_note", {"identifier": "attic", "is_directory": True})
        assert refused.is_error and "approval" in refused.content[0].text  # type: ignore[union-attr]
        _ok(await agent.call_tool("delete_note", {"identifier": "Old"}))  # one note: no approval
    plan, _ = await world.roll_back()
    (action,) = plan["actions"]
    assert action["kind"] == "compensate" and action["alternative"] == "note"


def test_the_shipped_manifest_fits_the_pinned_server(tmp_path: Path) -> None:
    """`manifest check --upstream` against the real server: no error, no warning."""
    world, _ = _world(tmp_path)
    env = {**world.env, "PATH": "/usr/bin:/bin"}
    found = subprocess.run(
        [str(Path(sys.executable).parent / "reversi"), "manifest", "check", str(reversi.manifests.path("basic-memory")),
         "--upstream", " ".join(world.command)],
        capture_output=True, text=True, timeout=300, env=env)
    assert found.returncode == 0, found.stderr
    assert "warning" not in found.stdout + found.stderr
    assert "checked against Basic Memory" in found.stdout


def _drill(tmp_path: Path, tool: str, args: dict[str, Any], *setup: str) -> dict[str, Any]:
    """`reversi manifest drill` of one basic-memory tool on a scratch server, as a user runs it."""
    server = BASIC_MEMORY.command("mcp")
    command = " ".join(["env", "HOME={scratch}/home", "BASIC_MEMORY_HOME={scratch}/notes", *server])
    flags = [flag for call in setup for flag in ("--setup", call)]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "reversi"), "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest",
         "drill", tool, "-m", str(reversi.manifests.path("basic-memory")), "--upstream", command,
         "--args", json.dumps(args), *flags, "--read",
         'read_note={"identifier": "Groceries", "output_format": "json", "include_frontmatter": true}', "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode in (0, 2), done.stderr
    drilled: dict[str, Any] = json.loads(done.stdout)
    return drilled


def test_each_alternative_is_drilled_and_counted_on_its_own(tmp_path: Path) -> None:
    """Issue 28 items 8 and 9: the overwrite case of write_note is drilled apart from the create case,
    times the index changes on its own are `volatile`, and coverage has a row for each alternative."""
    create = '{"title": "Groceries", "content": "- milk", "directory": "lists"}'
    created = _drill(tmp_path, "write_note", json.loads(create))
    updated = _drill(tmp_path, "write_note", {**json.loads(create), "content": "- tea", "overwrite": True},
                     f"write_note={create}")
    renamed = _drill(tmp_path, "delete_note", {"identifier": "Groceries"}, f"write_note={create}",
                     'move_note={"identifier": "Groceries", "destination_path": "lists/g.md"}')
    assert (created["alternative"], created["verdict"]) == ("created", "restored"), created["undo"]
    assert (updated["alternative"], updated["verdict"]) == ("updated", "restored"), updated["differences"]
    assert updated["volatile"] == ["*.updated_at"]
    assert renamed["alternative"] == "renamed note" and renamed["verdict"] in ("restored", "residue")
    assert [e.get("part") for e in renamed["undo"]["events"] if e["type"] == "compensating"] == [0, 1]
    assert renamed["undo"]["lines"][-1].endswith("compensated -> write_note, then move_note (1 attempt), verified")
    coverage = subprocess.run(
        [str(Path(sys.executable).parent / "reversi"), "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest",
         "coverage", "-m", str(reversi.manifests.path("basic-memory")), "--upstream", " ".join(
             ["env", f"HOME={tmp_path}/h", f"BASIC_MEMORY_HOME={tmp_path}/n", *BASIC_MEMORY.command("mcp")])],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    rows = coverage.stdout.splitlines()
    assert any(r.startswith("write_note [created]  undo: delete_note (inverse)  drilled") and r.endswith("restored")
               for r in rows), rows
    assert any(r.startswith("write_note [updated]  undo: write_note (inverse)  drilled") for r in rows), rows
    assert any(r.startswith("delete_note [renamed note]  undo: write_note, then move_note (inverse)  drilled")
               for r in rows), rows
    assert any(r.startswith("delete_note [note]") and "not drilled" in r for r in rows), rows
    assert rows[-1] == "6 write tools (9 undos to drill, counting each alternative), 3 drilled"


def test_the_draft_proposes_an_undo_for_every_write_tool_that_has_one(tmp_path: Path) -> None:
    """Issue 28 item 10: the draft of basic-memory left all six write tools `{}`."""
    world, _ = _world(tmp_path)
    done = subprocess.run([str(Path(sys.executable).parent / "reversi"), "manifest", "draft", "--upstream",
                           " ".join(world.command)], capture_output=True, text=True, timeout=300,
                          env={**world.env, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    entries = {e.pattern: e for e in parse_manifest(done.stdout, "draft.yaml")[0]}
    drafted = {name for name, e in entries.items() if e.compensations}
    assert drafted == {"write_note", "edit_note", "move_note", "delete_note", "create_memory_project"}
    assert [c.name for c in entries["write_note"].compensations] == ["overwritten", "created"]
    assert all(entries[name].capture is not None for name in ("write_note", "edit_note", "move_note", "delete_note"))

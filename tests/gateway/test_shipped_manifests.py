"""The manifests Reversi ships, in front of the real servers (npm server-memory and server-filesystem,
PyPI mcp-server-git), with data that existed before the run: an agent writes through `reversi-gateway`,
the operator endpoint rolls the run back, and the world read back with the server's own read tools
is the world before, or the plan and the report say exactly what stays."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types
from tests.gateway.conftest import gateway
from tests.gateway.npm import PythonAgent, needs_node, server

import reversi.manifests

pytestmark = [pytest.mark.anyio, needs_node]
RUN = "run_shipped"
GIT_SERVER = [str(Path(sys.executable).parent / "mcp-server-git")]


def _ok(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else result.content[0].text  # type: ignore[union-attr]


class World:
    """One server's data, the gateway flags that reach it, and a direct client to read it with."""

    def __init__(self, tmp_path: Path, name: str, command: Sequence[str], env: dict[str, str] | None = None,
                 manifest: str | None = None) -> None:
        self.command, self.env = list(command), env or {}
        self.flags = ["--upstream", f"{name}={shlex.join(command)}", "--db", f"sqlite:///{tmp_path}/r.db",
                      "-m", manifest or str(reversi.manifests.path(name))]

    @asynccontextmanager
    async def agent(self, run_id: str = RUN) -> AsyncIterator[Client]:
        async with gateway(*self.flags, "--run-id", run_id, env=self.env) as client:
            yield client

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Client]:
        async with PythonAgent().stdio(self.command, "legacy", self.env) as client:
            yield client

    async def read(self, tool: str, **args: Any) -> Any:
        async with self.reader() as client:
            return _ok(await client.call_tool(tool, args))

    async def roll_back(self, run_id: str = RUN) -> tuple[dict[str, Any], dict[str, Any]]:
        """The plan, then the report of the operator's rollback."""
        async with gateway("operator", *self.flags, env=self.env) as operator:
            plan = _ok(await operator.call_tool("reversi.plan_rollback", {"run_id": run_id}))
            report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": run_id, "confirm": True}))
        return plan, report


def _actions(plan: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {action["step"]: action for action in plan["actions"]}


# -- server-memory ----------------------------------------------------------------------------------

GRAPH = [
    {"type": "entity", "name": "ada", "entityType": "person", "observations": ["counts"]},
    {"type": "entity", "name": "bob", "entityType": "person", "observations": ["bakes", "sings"]},
    {"type": "relation", "from": "ada", "to": "bob", "relationType": "knows"},
]


def _memory(tmp_path: Path) -> World:
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in GRAPH))
    return World(tmp_path, "memory", server("memory"), {"MEMORY_FILE_PATH": str(path)})


def _graph(answer: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The graph as sets compare: entities by name, relations sorted (a re-created one comes back last)."""
    return sorted(answer["entities"], key=lambda e: e["name"]), sorted(answer["relations"], key=json.dumps)


async def test_an_observation_added_to_an_entity_that_existed_before_the_run_is_gone_after_the_rollback(
    tmp_path: Path,
) -> None:
    """Issue 16: with one entity there before the run, the report said `complete` while the observation
    the run added to it was left behind."""
    world = _memory(tmp_path)
    before = await world.read("read_graph")
    async with world.agent() as agent:
        _ok(await agent.call_tool("add_observations", {"observations": [
            {"entityName": "ada", "contents": ["counts", "writes notes"]}]}))  # "counts" was there: not added
    plan, report = await world.roll_back()
    assert plan["actions"][0]["args"] == {"deletions": [{"entityName": "ada", "observations": ["writes notes"]}]}
    assert report["complete"] is True and report["compensated"] == [0]
    assert await world.read("read_graph") == before


async def test_writes_and_deletes_over_an_existing_graph_roll_back_to_it_but_for_what_the_plan_says_stays(
    tmp_path: Path,
) -> None:
    world = _memory(tmp_path)
    before = await world.read("read_graph")
    async with world.agent() as agent:
        steps: list[tuple[str, dict[str, Any]]] = [
            ("add_observations", {"observations": [{"entityName": "ada", "contents": ["writes notes"]}]}),
            ("create_entities", {"entities": [{"name": "cy", "entityType": "cat", "observations": ["naps"]}]}),
            ("create_relations", {"relations": [{"from": "cy", "to": "ada", "relationType": "owns"}]}),
            ("delete_observations", {"deletions": [{"entityName": "bob", "observations": ["bakes", "never"]}]}),
            ("delete_entities", {"entityNames": ["bob"]}),
            ("read_graph", {}),
        ]
        for tool, args in steps:
            _ok(await agent.call_tool(tool, args))
    plan, report = await world.roll_back()
    actions = _actions(plan)
    assert actions[5]["kind"] == "skip" and actions[5]["reason"] == "read"
    assert actions[4]["args"] == {"entities": [{"name": "bob", "entityType": "person", "observations": ["sings"]}]}
    assert "relations to and from the deleted entities are not re-created" in actions[4]["residue"][0]
    assert actions[3]["args"] == {"observations": [{"entityName": "bob", "contents": ["bakes", "sings"]}]}
    assert report["complete"] is True and report["compensated"] == [5 - i for i in range(1, 6)]
    entities, relations = _graph(await world.read("read_graph"))
    was_entities, was_relations = _graph(before)
    bob = next(e for e in entities if e["name"] == "bob")
    assert sorted(bob["observations"]) == ["bakes", "sings"]  # back, "bakes" at the end (the residue says so)
    assert [{**e, "observations": sorted(e["observations"])} for e in entities] == was_entities
    assert relations == [] and was_relations == [{"from": "ada", "relationType": "knows", "to": "bob"}]


# -- server-filesystem ------------------------------------------------------------------------------


def _files(tmp_path: Path) -> tuple[World, Path]:
    root = (tmp_path / "files").resolve()
    (root / "docs").mkdir(parents=True)
    (root / "a.txt").write_text("alpha beta\n")
    (root / "b.txt").write_bytes(b"keep\r\nme\n")
    (root / "docs" / "c.txt").write_text("see\n")
    return World(tmp_path, "filesystem", server("filesystem", str(root))), root


async def _tree(world: World, root: Path) -> dict[str, Any]:
    """Every file's text and every directory, read with the server's own tools."""
    async with world.reader() as client:
        tree = json.loads(_ok(await client.call_tool("directory_tree", {"path": str(root)}))["content"])
        found: dict[str, Any] = {}

        async def walk(entries: list[dict[str, Any]], at: str) -> None:
            for entry in entries:
                path = f"{at}/{entry['name']}"
                if entry["type"] == "directory":
                    found[path] = "dir"
                    await walk(entry["children"], path)
                else:
                    read = await client.call_tool("read_text_file", {"path": str(root) + path})
                    found[path] = _ok(read)["content"]

        await walk(tree, "")
    return found


async def test_a_dry_run_edit_is_planned_as_a_read_and_its_rollback_leaves_the_file_untouched(tmp_path: Path) -> None:
    """Issue 16: `edit_file` with `dryRun: true` was planned as a write, and its "undo" turned
    `alpha beta` into `alpha alpha`."""
    world, root = _files(tmp_path)
    async with world.agent() as agent:
        edit = {"path": str(root / "a.txt"), "edits": [{"oldText": "beta", "newText": "alpha"}], "dryRun": True}
        assert "-alpha beta" in _ok(await agent.call_tool("edit_file", edit))["content"]
    plan, report = await world.roll_back()
    assert plan["actions"] == [{"step": 0, "tool": "edit_file", "kind": "skip", "reason": "read"}]
    assert report["complete"] is True and report["skipped"] == [0]
    assert (root / "a.txt").read_text() == "alpha beta\n"


async def test_edits_writes_and_moves_over_existing_files_roll_back_and_the_plan_names_what_stays(
    tmp_path: Path,
) -> None:
    world, root = _files(tmp_path)
    before = await _tree(world, root)
    async with world.agent() as agent:
        steps: list[tuple[str, dict[str, Any]]] = [
            ("edit_file", {"path": str(root / "a.txt"), "edits": [{"oldText": "beta", "newText": "gamma"}]}),
            ("write_file", {"path": str(root / "b.txt"), "content": "overwritten"}),
            ("move_file", {"source": str(root / "docs" / "c.txt"), "destination": str(root / "c2.txt")}),
            ("write_file", {"path": str(root / "new.txt"), "content": "fresh"}),
            ("create_directory", {"path": str(root / "docs")}),  # there already: changes nothing
            ("create_directory", {"path": str(root / "made")}),
        ]
        for tool, args in steps:
            _ok(await agent.call_tool(tool, args))
    plan, report = await world.roll_back()
    actions = _actions(plan)
    assert actions[5]["reason"] == "cannot be undone: the new directory stays: the server has no tool that removes one"
    assert actions[4] == {"step": 4, "tool": "create_directory", "kind": "skip", "reason": "read"}
    assert actions[3]["kind"] == "unrecoverable" and actions[3]["reason"].startswith(
        "compensation arguments unavailable: $before.content (the capture found nothing before the call: ENOENT")
    assert [a["kind"] for a in plan["actions"][3:]] == ["compensate"] * 3
    assert report["compensated"] == [2, 1, 0] and report["complete"] is False
    assert [u["step"] for u in report["unrecoverable"]] == [5, 3]
    after = await _tree(world, root)
    assert after == before | {"/new.txt": "fresh", "/made": "dir"}  # exactly what the plan said stays
    assert (root / "b.txt").read_bytes() == b"keep\r\nme\n"


async def test_two_runs_on_one_file_through_the_real_server_are_undone_later_first(tmp_path: Path) -> None:
    """Issue 26: run 0 edits a.txt, run 1 then overwrites it. Run 0's plan names run 1 (the shipped
    manifest's `resources:`), rolling run 0 back alone puts nothing back under run 1's write, and
    rolling back run 1 then run 0 restores the file the runs found."""
    world, root = _files(tmp_path)
    path = str(root / "a.txt")
    async with world.agent("run_files_0") as agent:
        _ok(await agent.call_tool("edit_file", {"path": path, "edits": [{"oldText": "beta", "newText": "gamma"}]}))
    async with world.agent("run_files_1") as agent:
        _ok(await agent.call_tool("write_file", {"path": path, "content": "second\n"}))
    plan, report = await world.roll_back("run_files_0")
    (action,) = plan["actions"]
    assert action["kind"] == "defer"
    assert action["blocked_by_runs"] == [{"run": "run_files_1", "step": 0, "resource": f"file:{path}"}]
    assert report["compensated"] == [] and (root / "a.txt").read_text() == "second\n"
    _, later = await world.roll_back("run_files_1")
    _, earlier = await world.roll_back("run_files_0")
    assert later["compensated"] == [0] and earlier["compensated"] == [0]
    assert (root / "a.txt").read_text() == "alpha beta\n"


async def test_a_capture_that_fails_refuses_the_call_and_forwards_nothing(tmp_path: Path) -> None:
    world, _ = _files(tmp_path)
    async with world.agent() as agent:
        outside = await agent.call_tool("write_file", {"path": "/etc/reversi-never", "content": "x"})
    assert outside.is_error and "capture read_text_file answered an error: " in outside.content[0].text  # type: ignore[union-attr]
    assert "Access denied" in outside.content[0].text  # type: ignore[union-attr]
    with reversi.open(world.flags[3]) as ledger:
        run = ledger.get_run(RUN)
        refused = [e for e in run.events() if e.type == "refused"]
        assert [e.data["code"] for e in refused] == ["capture_failed"] and not run.steps()


async def test_a_file_that_is_not_utf8_is_not_written_back_from_its_lossy_read(tmp_path: Path) -> None:
    """read_text_file answers undecodable bytes as U+FFFD: writing that back would pass the read-back
    and still not be the file, so the plan says the overwrite cannot be undone, and nothing is written."""
    world, root = _files(tmp_path)
    (root / "latin1.txt").write_bytes(b"caf\xe9 \xff\xfe\n")
    async with world.agent() as agent:
        _ok(await agent.call_tool("write_file", {"path": str(root / "latin1.txt"), "content": "replaced\n"}))
    plan, report = await world.roll_back()
    [action] = plan["actions"]
    assert action["kind"] == "unrecoverable" and action["reason"].startswith(
        "the compensation does not fit this call: `$before.content` contains")
    assert report["complete"] is False and [u["step"] for u in report["unrecoverable"]] == [0]
    assert (root / "latin1.txt").read_bytes() == b"replaced\n"  # as the plan said: it stays


# -- mcp-server-git ---------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _repo(tmp_path: Path) -> tuple[World, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "T")
    (repo / "README").write_text("hello\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "first")
    (repo / "notes.txt").write_text("untracked notes\n")
    return World(tmp_path, "git", [*GIT_SERVER, "--repository", str(repo)]), repo


async def _git_world(world: World, repo: Path) -> dict[str, Any]:
    async with world.reader() as client:
        return {tool: _ok(await client.call_tool(tool, {"repo_path": str(repo), **more})) for tool, more in [
            ("git_status", {}), ("git_branch", {"branch_type": "local"}), ("git_log", {}), ("git_diff_staged", {})]}


async def test_a_branch_checkout_and_add_roll_back_but_for_the_branch_the_plan_says_stays(tmp_path: Path) -> None:
    world, repo = _repo(tmp_path)
    before = await _git_world(world, repo)
    where = {"repo_path": str(repo)}
    async with world.agent() as agent:
        _ok(await agent.call_tool("git_create_branch", {**where, "branch_name": "feature"}))
        _ok(await agent.call_tool("git_checkout", {**where, "branch_name": "feature"}))
        _ok(await agent.call_tool("git_add", {**where, "files": ["notes.txt"]}))
    plan, report = await world.roll_back()
    actions = _actions(plan)
    assert actions[1]["args"] == {**where, "branch_name": "main"}
    assert actions[0]["reason"] == "cannot be undone: the branch stays: the server has no tool that deletes a branch"
    assert report["compensated"] == [2, 1] and [u["step"] for u in report["unrecoverable"]] == [0]
    after = await _git_world(world, repo)
    assert after["git_status"] == before["git_status"] and after["git_diff_staged"] == before["git_diff_staged"]
    assert after["git_log"] == before["git_log"]
    assert after["git_branch"] == "  feature\n* main"  # the branch the plan said stays



def test_a_commit_cannot_be_undone_and_the_add_and_checkout_it_stands_on_wait(tmp_path: Path) -> None:
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(reversi.manifests.path("git"))]) as ledger:
        run = ledger.start_run()
        with run.step("git_checkout", {"repo_path": "/r"}, before="On branch main\n") as step:
            step.succeeded("Switched to branch 'feature'")
        with run.step("git_add", {"repo_path": "/r"}, before="Staged changes:\n") as step:
            step.succeeded("Files staged successfully")
        with run.step("git_commit", {"repo_path": "/r"}) as step:
            step.succeeded("Changes committed successfully with hash 0123")
        actions = [(a.step, a.kind.value, a.reason) for a in run.plan().actions]
    assert actions == [
        (2, "unrecoverable", "cannot be undone: the commit stays on its branch: the server has no tool that moves a "
                             "branch back"),
        (1, "defer", "blocked by step 2"),
        (0, "defer", "blocked by step 2"),
    ]

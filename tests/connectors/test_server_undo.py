"""Undos a server declares, end to end: `reversi-connectors serve` lists each tool's undo as SEP-3172's
`recovery`; a gateway told to take that upstream at its word (`--server-undo`) journals it with each
step, with no manifest at all; `reversi plan` in another process plans from the journal and says where
the undo came from, and the operator endpoint undoes the run byte for byte. Without the operator's say
so, or against a manifest the operator wrote, a server's declaration counts for nothing."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from tests.connectors.conftest import CONNECTORS, files_under, reversi_cli
from tests.connectors.test_gateway import _gateway, _ok

import reversi
from reversi.errors import ConfigError
from reversi.gateway.options import UpstreamSpec, upstreams_from_config, with_server_undo

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _upstream(tmp_path: Path) -> list[str]:
    return ["--upstream", f"c={shlex.join([CONNECTORS, 'serve', 'fs'])}", "--db", f"sqlite:///{tmp_path}/r.db"]


async def _agent_edits(tmp_path: Path, run_id: str, *flags: str) -> None:
    async with _gateway(*_upstream(tmp_path), "--run-id", run_id, *flags) as agent:
        listed = {tool.name: tool for tool in (await agent.list_tools()).tools}
        assert listed["fs.write_file"].annotations is not None  # the agent sees the server's listing as it is
        _ok(await agent.call_tool("fs.write_file", {"path": "notes.txt", "content": "the agent's\n"}))
        _ok(await agent.call_tool("fs.write_file", {"path": "new.txt", "content": "new\n"}))


def _plan(tmp_path: Path, run_id: str) -> dict[str, Any]:
    done = reversi_cli("--db", f"sqlite:///{tmp_path}/r.db", "plan", run_id, "--json")
    assert done.code in (0, 2), done.err  # 2: not every step can be undone
    return json.loads(done.out)  # type: ignore[no-any-return]


async def test_a_run_is_undone_with_the_undos_its_server_declared_and_no_manifest(
    tmp_path: Path, world: Path
) -> None:
    before = files_under(world)
    await _agent_edits(tmp_path, "run_sd", "--server-undo", "c=trust")

    plan = _plan(tmp_path, "run_sd")  # another process, which never saw the listing
    assert [(a["step"], a["kind"], a.get("compensation_tool"), a.get("declared_by")) for a in plan["actions"]] == [
        (1, "compensate", "fs.restore", "server c (recovery)"), (0, "compensate", "fs.restore", "server c (recovery)")]
    assert plan["actions"][0]["needs_approval"] is False
    text = reversi_cli("--db", f"sqlite:///{tmp_path}/r.db", "plan", "run_sd").out
    assert "compensate -> fs.restore  (undo declared by server c (recovery))" in text

    async with _gateway("operator", *_upstream(tmp_path)) as operator:
        report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_sd", "confirm": True}))
    assert report["complete"] is True and report["compensated"] == [1, 0], report
    assert files_under(world) == before


async def test_approve_makes_each_declared_undo_wait_for_a_person(tmp_path: Path, world: Path) -> None:
    await _agent_edits(tmp_path, "run_ap", "--server-undo", "c=approve")
    plan = _plan(tmp_path, "run_ap")
    assert [a["needs_approval"] for a in plan["actions"]] == [True, True]
    async with _gateway("operator", *_upstream(tmp_path)) as operator:
        report = _ok(await operator.call_tool("reversi.execute_rollback", {"run_id": "run_ap", "confirm": True}))
    assert report["compensated"] == [] and report["complete"] is False
    assert (world / "new.txt").exists()  # nothing undone before a person agrees


async def test_without_the_operators_say_so_a_declaration_counts_for_nothing(tmp_path: Path, world: Path) -> None:
    await _agent_edits(tmp_path, "run_no")
    assert {a["kind"] for a in _plan(tmp_path, "run_no")["actions"]} == {"unmanifested"}
    # enforce mode refuses what no manifest covers, whatever the server declares: a server does not vouch
    # for its own tools, even taken at its word for their undos
    async with _gateway(*_upstream(tmp_path), "--run-id", "run_enf", "--mode", "enforce",
                        "--server-undo", "c=trust") as agent:
        refused = await agent.call_tool("fs.write_file", {"path": "x.txt", "content": "x"})
    assert refused.is_error and not (world / "x.txt").exists()
    assert "no manifest entry for fs.write_file" in str(refused.content)


async def test_a_manifest_the_operator_wrote_wins_over_the_servers_declaration(tmp_path: Path, world: Path) -> None:
    manifest = tmp_path / "ops.yaml"
    manifest.write_text("version: 1\ntools:\n  fs.write_file: {irreversible: \"we never undo files\"}\n")
    await _agent_edits(tmp_path, "run_ops", "--server-undo", "c=trust", "-m", str(manifest))
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        intended = [e for e in ledger.get_run("run_ops").events() if e.type == "intended"]
    assert intended and all("declared_undo" not in e.data for e in intended)
    assert {a["kind"] for a in _plan(tmp_path, "run_ops")["actions"]} == {"unmanifested"}  # `-m` not given here


def test_server_undo_is_read_from_the_config_and_the_flag() -> None:
    found = upstreams_from_config({"a": {"command": "srv", "server_undo": "approve"},
                                   "b": {"url": "http://127.0.0.1:9/mcp", "server_undo": "trust"}, "c": "srv"})
    assert [spec.server_undo for spec in found] == ["approve", "trust", None]
    assert [s.server_undo for s in with_server_undo(found, ["c=trust", "a=trust"])] == ["trust", "trust", "trust"]
    for bad, said in (({"a": {"command": "srv", "server_undo": True}}, "upstreams.a.server_undo: expected approve "
                                                                         "or trust"),
                      ({"a": {"command": "srv", "server_undo": "yes"}}, "expected approve or trust")):
        with pytest.raises(ConfigError, match=said):
            upstreams_from_config(bad)
    spec = (UpstreamSpec("a", command=("srv",)),)
    for flag, said in (("a", "expected NAME=approve|trust"), ("b=trust", "no upstream is named 'b'"),
                       ("a=all", "--server-undo a: expected approve or trust")):
        with pytest.raises(ConfigError, match=said):
            with_server_undo(spec, [flag])


async def test_settling_a_step_by_hand_checks_the_result_against_the_undo_its_server_declared(
    tmp_path: Path, world: Path
) -> None:
    await _agent_edits(tmp_path, "run_rs", "--server-undo", "c=trust")
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:  # no manifest in this process
        run = ledger.get_run("run_rs")
        assert run.missing_from_result(1, None) == ["$result"]  # before, no entry: nothing was checked


def test_a_listing_read_again_twice_between_calls_is_declared_whatever_its_address(tmp_path: Path) -> None:
    """Two restarts of an upstream between calls replace its listing twice; the new list may sit where a
    freed one did, so the gateway holds the lists it read, not their ids."""
    from reversi.core.surfaces import Surface
    from reversi.engine.keys import LOCAL_ADMIN
    from reversi.gateway.proxy import Proxy
    from reversi.gateway.upstream import UpstreamPool

    def listing(undo: str) -> list[dict[str, Any]]:
        recovery = {"strategy": "compensation", "compensatingOperation": {"operationId": undo, "parameters": {}}}
        fresh: list[dict[str, Any]] = json.loads(json.dumps([{"name": "create", "annotations": {"recovery": recovery}},
                                                             {"name": "delete"}, {"name": "nuke"}]))
        return fresh

    async def no_run(ctx: Any) -> Any:
        raise AssertionError("no call is made")

    pool = UpstreamPool((UpstreamSpec("shop", command=("srv",), server_undo="trust"),))
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        door = ledger.for_principal(LOCAL_ADMIN, Surface.GATEWAY)
        proxy = Proxy(pool, lambda ctx: door, no_run, 5.0)
        pool.upstreams[0].listed = listing("delete")
        proxy._declare_undos(door)
        pool.upstreams[0].listed = listing("delete")
        pool.upstreams[0].listed = listing("nuke")
        proxy._declare_undos(door)
        entry = ledger.manifests.lookup("create")
        assert entry is not None and entry.compensations[0].tool == "nuke"

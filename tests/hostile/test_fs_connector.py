"""Hostile input to the fs connector: forged results against every fs compensation, and hostile paths
against every fs tool. A compensation never acts on a result this connector did not seal, nothing is
ever created, changed or deleted outside the root, and every failure is a connector error of one line.

The root holds symbolic links to a host folder beside it, so a path that followed one would show."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.connectors.conftest import files_under
from tests.hostile.fuzz import fuzz_settings, tried

from reversi.connectors import _snapshots, fs
from reversi.connectors._base import ToolKind
from reversi.errors import BadArgument, ConnectorError, UntrustedResult

CONNECTORS = str(Path(sys.executable).parent / "reversi-connectors")
COMPENSATIONS = [tool.name for tool in fs.CONNECTOR.of_kind(ToolKind.COMPENSATION)]
OTHERS = [tool.name for tool in fs.CONNECTOR.tools if tool.kind is not ToolKind.COMPENSATION]


@dataclass
class World:
    root: Path
    host: Path
    genuine: dict[str, dict[str, Any]]  # a sealed result of each forward tool, by tool name

    def outside(self) -> Any:
        key = _snapshots.connector_dir() / "seal.key"
        return files_under(self.host), key.read_bytes()

    def everything(self) -> Any:
        return self.outside(), files_under(self.root)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    root, host = tmp_path / "root", tmp_path / "host"
    (root / "docs").mkdir(parents=True)
    host.mkdir()
    (host / "secret.txt").write_text("a host secret\n")
    (host / "victim.txt").write_text("a host file\n")
    (root / "docs" / "a.txt").write_text("a\n")
    (root / "mine.txt").write_text("mine\n")
    (root / "link").symlink_to(host)
    (root / "secret").symlink_to(host / "secret.txt")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    _snapshots.store((host / "secret.txt").read_bytes())  # as if an agent had had it kept once
    genuine = {"fs.write_file": fs.write_file(path="mine.txt", content="the agent's\n"),
               "fs.delete": fs.delete(path="docs/a.txt"), "fs.make_dir": fs.make_dir(path="made"),
               "fs.move": fs.move(source="mine.txt", destination="made/moved.txt")}
    return World(root, host, genuine)


def _hostile_paths(host: Path) -> st.SearchStrategy[str]:
    part = st.sampled_from(["..", ".", "", "link", "secret", "docs", "made", "a.txt", "victim.txt", "x" * 300,
                            "\0", "é", " ", "%2e%2e", "\\..", "..\\..", str(host), ".reversi", "connectors",
                            "blobs", "seal.key", "~", "$HOME", "\n", "\udcff", "\ud800", "é" * 128])
    joined = st.lists(part | st.text(max_size=8), min_size=1, max_size=6).map("/".join)
    return joined | st.sampled_from([str(host / "victim.txt"), "link/victim.txt", "/etc/passwd", "secret",
                                     "../host/victim.txt", ".reversi/connectors/seal.key"])


def _values(host: Path) -> st.SearchStrategy[Any]:
    scalar = st.none() | st.booleans() | st.integers() | st.text(max_size=10) | _hostile_paths(host) | st.sampled_from(
        [str(host), "/dev/zero", "/", "0" * 64, "f" * 64, "fs.write_file", "fs.make_dir", "0755", "4755"])
    return st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["exists", "type", "sha256", "size", "mode", "snapshot", "tool", "args", "key", "mac", "v"]),
        inner, max_size=4), max_leaves=8)


@st.composite
def _forged(draw: st.DrawFn, world: World) -> dict[str, Any]:
    """A genuine result with some of its fields (seal included) replaced, removed or added."""
    result: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(sorted(world.genuine.items())))[1]))
    fields = ["root", "path", "before", "after", "source", "destination", "sha256", "mode", "reversi_seal"]
    for name in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4, unique=True)):
        action = draw(st.sampled_from(["replace", "remove", "seal-part"]))
        if action == "remove":
            result.pop(name, None)
        elif action == "seal-part" and isinstance(result.get("reversi_seal"), dict):
            part = draw(st.sampled_from(["tool", "args", "key", "mac"]))
            result["reversi_seal"][part] = draw(_values(world.host))
        else:
            result[name] = draw(_values(world.host))
    return result


def _forged_call(world: World, data: st.DataObject) -> tuple[str, dict[str, Any]]:
    """A compensation, and a forged result for it (never one that is genuine after all)."""
    forged = data.draw(_forged(world))
    assume(all(forged != json.loads(json.dumps(made)) for made in world.genuine.values()))
    tried("fs-forged-results")
    return data.draw(st.sampled_from(COMPENSATIONS)), forged


@fuzz_settings(ci=150)
@given(data=st.data())
def test_no_compensation_acts_on_a_result_it_did_not_seal(world: World, data: st.DataObject) -> None:
    tool, forged = _forged_call(world, data)
    before = world.everything()
    with pytest.raises(ConnectorError) as refused:
        fs.CONNECTOR.tool(tool).invoke({"result": forged, "step": 1})
    assert isinstance(refused.value, UntrustedResult), refused.value.message
    assert "\n" not in refused.value.message
    assert world.everything() == before


@fuzz_settings(ci=150)
@given(data=st.data())
def test_hostile_paths_reach_nothing_outside_the_root(world: World, data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(OTHERS))
    params = [p.name for p in fs.CONNECTOR.tool(tool).params if p.name in ("path", "source", "destination")]
    arguments: dict[str, Any] = {name: data.draw(_hostile_paths(world.host)) for name in params}
    if tool == "fs.write_file":
        arguments["content"] = data.draw(st.sampled_from(["#!/bin/sh\necho planted\n", "\ud800"]) | st.text())
    before, message = world.everything(), ""
    try:
        fs.CONNECTOR.tool(tool).invoke(arguments)
    except ConnectorError as exc:
        message = exc.message
    tried("fs-paths")
    assert "\n" not in message, message
    assert world.outside() == before[0]
    if message:  # a call that failed changed nothing
        assert world.everything() == before, message
    assert all(not p.is_symlink() or p.name in ("link", "secret") for p in world.root.rglob("*"))


@fuzz_settings(ci=5)
@given(data=st.data())
def test_the_installed_compensator_refuses_forged_results_on_one_line(world: World, data: st.DataObject) -> None:
    tool, forged = _forged_call(world, data)
    before = world.everything()
    done = subprocess.run([CONNECTORS, "compensate"], input=json.dumps({"tool": tool, "args": {"result": forged}}),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("untrusted result: "), done.stderr
    assert world.everything() == before


def test_a_genuine_result_is_refused_by_the_compensations_of_other_tools(world: World) -> None:
    accepts = {"fs.restore": {"fs.write_file", "fs.delete"}, "fs.move_back": {"fs.move"},
               "fs.remove_dir": {"fs.make_dir"}}
    for compensation, tools in accepts.items():
        for forward, result in world.genuine.items():
            if forward in tools:
                continue
            with pytest.raises(UntrustedResult, match=f"sealed as one of {forward}"):
                fs.CONNECTOR.tool(compensation).invoke({"result": result})
    with pytest.raises(BadArgument, match="bad argument result: expected an object"):
        fs.CONNECTOR.tool("fs.restore").invoke({"result": "trust me"})

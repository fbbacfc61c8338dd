"""`reversi-connectors`: list, manifest, bad input, and serve as an MCP server (stdio and HTTP)."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import Client, StdioServerParameters, types
from tests.connectors.conftest import CONNECTORS, connectors_cli, reversi_cli

from reversi.connectors import connectors

IDEMPOTENCY_META_KEY = "reversi/idempotency_key"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_list_names_every_connector_its_tools_and_settings() -> None:
    listing = connectors_cli("list", "--json").json()
    assert [c["name"] for c in listing] == [c.name for c in connectors()]
    fs = listing[0]
    assert fs["forward"] == ["fs.write_file", "fs.delete", "fs.move", "fs.make_dir"]
    assert fs["compensation"] == ["fs.restore", "fs.move_back", "fs.remove_dir"]
    assert fs["read"] == ["fs.stat"]
    assert [s["name"] for s in fs["settings"]] == ["REVERSI_FS_ROOT", "REVERSI_CONNECTOR_DIR", "REVERSI_CONNECTOR_KEY"]
    text = connectors_cli("list").out
    assert "sql: rows by primary key in SQLite or PostgreSQL" in text and "  read:         sql.select" in text


def test_every_shipped_manifest_names_only_tools_its_connector_has() -> None:
    import yaml

    for connector in connectors():
        entries = yaml.safe_load(connector.manifest_text())["tools"]
        for name, entry in entries.items():
            matched = [tool for tool in connector.tools if fnmatch.fnmatchcase(tool.name, name)]
            undo_tool = str(entry.get("irreversible", "")).startswith("an undo tool")
            kind = "read" if entry.get("effect") == "read" else "compensation" if undo_tool else "forward"
            assert matched and {t.kind for t in matched} == {kind}, name
            for block in ("compensation", "verification"):
                if block in entry:
                    tool = connector.tool(entry[block]["tool"])
                    assert set(entry[block]["args"]) <= {p.name for p in tool.params}, (name, block)


def test_the_manifest_of_some_connectors_passes_the_real_check(tmp_path: Path) -> None:
    for names in (["fs"], ["sql"], ["fs", "sql"], []):
        path = tmp_path / f"{'-'.join(names) or 'all'}.yaml"
        done = connectors_cli("manifest", *names)
        assert done.code == 0, done.err
        path.write_text(done.out)
        checked = reversi_cli("manifest", "check", str(path))
        assert checked.code == 0 and "warning" not in checked.out, checked.out
    # and against the connectors' own MCP server: every tool it offers, undo tools included, has an entry
    fit = reversi_cli("manifest", "check", str(tmp_path / "all.yaml"), "--upstream", f"{CONNECTORS} serve")
    assert fit.code == 0 and "warning" not in fit.out, fit.out


UNKNOWN_CONNECTOR = "bad argument connector: unknown connector 'nope' (known: fs, sql, http, stripe, github, slack)"


@pytest.mark.parametrize(("args", "stdin", "error"), [
    (["manifest", "nope"], "", UNKNOWN_CONNECTOR),
    (["serve", "nope"], "", UNKNOWN_CONNECTOR),
    (["read"], '{"tool": "fs.write_file", "arguments": {}}', "unknown tool: fs.write_file (it is a forward tool"),
    (["read"], '{"arguments": {}}', "bad argument tool: required"),
    (["compensate"], "not json", "bad argument stdin: expected the compensation call as JSON"),
    (["compensate"], '{"tool": "fs.restore", "args": {}}', "bad argument result: required"),
    (["compensate"], '{"tool": "fs.restore", "args": {"result": {}, "root": "/"}}',
     "bad argument root: fs.restore takes no such argument"),
    (["compensate"], '{"tool": "fs.restore", "args": {"result": {"root": "/", "path": "etc/passwd"}}}',
     "untrusted result: the result carries no seal"),
    (["read"], '{"tool": "fs.stat", "arguments": {"path": "passwd", "root": "/etc"}}',
     "bad argument root: fs.stat takes no such argument"),
    (["compensate"], '{"tool": "fs.restore", "args": []}', "bad argument args: expected an object"),
    (["serve", "--http", "nowhere"], "", "bad argument --http: expected HOST:PORT"),
    (["frobnicate"], "", "No such command 'frobnicate'."),
])
def test_bad_input_is_one_line_on_stderr_and_exit_1(args: list[str], stdin: str, error: str) -> None:
    done = connectors_cli(*args, stdin=stdin)
    assert done.code == 1 and done.out == ""
    assert done.err.startswith(error) and done.err.count("\n") == 1, done.err


@asynccontextmanager
async def _served(*names: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=CONNECTORS, args=["serve", *names], env=dict(os.environ), cwd=os.getcwd())
    async with Client(params, cache=None) as client:
        yield client


def text_of(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def _hints(tool: types.Tool) -> tuple[Any, ...]:
    assert tool.annotations is not None
    return tool.annotations.read_only_hint, tool.annotations.destructive_hint, tool.annotations.idempotent_hint


@pytest.mark.anyio
async def test_serve_offers_the_tools_with_schemas_and_hints_and_runs_them(tmp_path: Path) -> None:
    async with _served("fs") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(tools) == [tool.name for tool in connectors(["fs"])[0].tools]
        assert _hints(tools["fs.stat"]) == (True, False, True)
        assert _hints(tools["fs.write_file"]) == (False, True, False)
        assert _hints(tools["fs.restore"]) == (False, True, True)
        assert tools["fs.write_file"].input_schema["required"] == ["path"]

        written = await client.call_tool("fs.write_file", {"path": "hello.txt", "content": "hi"})
        assert not written.is_error and written.structured_content is not None
        assert written.structured_content["after"]["sha256"] == json.loads(text_of(written))["after"]["sha256"]
        keyed = cast(types.RequestParamsMeta, {IDEMPOTENCY_META_KEY: "k"})
        restored = await client.call_tool("fs.restore", {"result": written.structured_content, "step": 0},
                                          meta=keyed)
        assert not restored.is_error and not (tmp_path / "hello.txt").exists()

        refused = await client.call_tool("fs.write_file", {"path": "../out.txt", "content": "x"})
        assert refused.is_error and text_of(refused) == (
            f"bad argument path: '../out.txt' leaves the root {tmp_path}: a '..' part is refused")
        elsewhere = await client.call_tool("fs.stat", {"path": "passwd", "root": "/etc"})
        assert elsewhere.is_error and text_of(elsewhere) == "bad argument root: fs.stat takes no such argument"
        forged = await client.call_tool("fs.restore", {"result": {**written.structured_content, "path": "x"}})
        assert forged.is_error and text_of(forged) == (
            "untrusted result: the result of fs.write_file was changed after it was sealed")
        unknown = await client.call_tool("sql.select", {"table": "t"})
        assert unknown.is_error and text_of(unknown) == "unknown tool: sql.select"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    with (tmp_path / "serve.stderr").open("w") as stderr:
        proc = subprocess.Popen([CONNECTORS, "serve", "fs", "--http", f"127.0.0.1:{port}"], stderr=stderr)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.anyio
async def test_serve_over_http_answers_at_mcp(http_server: str, tmp_path: Path) -> None:
    host, port = http_server.split("//")[1].split("/")[0].split(":")
    with anyio.fail_after(30):
        while True:
            try:
                await (await anyio.connect_tcp(host, int(port))).aclose()
                break
            except OSError:
                await anyio.sleep(0.05)
    async with Client(http_server, cache=None) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "fs.write_file" in names
        answer = await client.call_tool("fs.stat", {"path": "nothing.txt"})
        assert answer.structured_content == {"root": str(tmp_path), "path": "nothing.txt", "exists": False,
                                             "type": None, "sha256": None, "size": None, "mode": None}

"""`reversi-connectors`: list, manifest, bad input, and serve as an MCP server (stdio and HTTP)."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.connectors.conftest import CONNECTORS, connectors_cli, reversi_cli, run_command
from tests.connectors.fake_server import URL, served_with

from reversi.connectors import connectors
from reversi.demo.fakes.stripe import KEY, FakeStripe

GATEWAY = str(Path(sys.executable).parent / "reversi-gateway")

IDEMPOTENCY_META_KEY = "reversi/idempotency_key"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_list_names_every_connector_its_tools_and_settings() -> None:
    listing = connectors_cli("list", "--json").json()
    assert [c["name"] for c in listing] == [c.name for c in connectors()]
    fs = listing[0]
    assert fs["forward"] == ["fs.write_file", "fs.delete", "fs.move", "fs.make_dir"]
    assert fs["compensation"] == ["fs.restore", "fs.move_back", "fs.remove_dir", "fs.restore_changes"]
    assert fs["read"] == ["fs.changes_undone", "fs.stat"]
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


TOKEN = "a-bearer-token-of-more-than-32-characters"


def _listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"reversi-connectors serve --http did not listen on {port} (exit {proc.poll()})")


@pytest.fixture
def http_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    """`serve NAMES --http` on a free loopback port, with REVERSI_CONNECTORS_TOKEN set; yields its /mcp URL."""
    monkeypatch.setenv("REVERSI_CONNECTORS_TOKEN", TOKEN)
    started: list[subprocess.Popen[bytes]] = []

    def start(*names: str) -> str:
        port = _free_port()
        with (tmp_path / f"serve-{len(started)}.stderr").open("w") as stderr:
            started.append(subprocess.Popen([CONNECTORS, "serve", *names, "--http", f"127.0.0.1:{port}"],
                                            stderr=stderr))
        _listening(port, started[-1])
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(30)


@asynccontextmanager
async def _bearing(url: str, token: str) -> AsyncIterator[Client]:
    async with (create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http), cache=None) as client):
        yield client


@pytest.mark.anyio
async def test_serve_over_http_answers_at_mcp_to_the_bearer_of_its_token(
    http_server: Callable[..., str], tmp_path: Path
) -> None:
    url = http_server("fs")
    async with _bearing(url, TOKEN) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "fs.write_file" in names
        answer = await client.call_tool("fs.stat", {"path": "nothing.txt"})
        assert answer.structured_content == {"root": str(tmp_path), "path": "nothing.txt", "exists": False,
                                             "type": None, "sha256": None, "size": None, "mode": None}


def test_serve_over_http_answers_401_and_runs_no_tool_without_its_token(
    http_server: Callable[..., str], tmp_path: Path
) -> None:
    url = http_server("fs")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "fs.write_file", "arguments": {"path": "pwned.txt", "content": "x"}}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}x"},
                 {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}, {"Authorization": f"bearer{TOKEN}"}):
        answer = httpx.post(url, json=call, headers={**accept, **auth}, timeout=30)
        assert answer.status_code == 401, (auth, answer.text)
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert httpx.get(url, headers=auth, timeout=30).status_code == 401
    assert not (tmp_path / "pwned.txt").exists()


@pytest.mark.parametrize(("token", "error"), [
    (None, "REVERSI_CONNECTORS_TOKEN is not set: serve --http answers only requests that carry it as a bearer"
           " token (make one with: openssl rand -hex 32)"),
    ("short", "REVERSI_CONNECTORS_TOKEN must be at least 32 characters long"),
])
def test_serve_over_http_does_not_start_without_a_token(token: str | None, error: str) -> None:
    env = {"REVERSI_CONNECTORS_TOKEN": token} if token else {}
    done = connectors_cli("serve", "fs", "--http", f"127.0.0.1:{_free_port()}", env=env)
    assert (done.code, done.out, done.err) == (1, "", error + "\n")


def _gateway(config: Path, db: str, manifest: Path, *args: str) -> Client:
    """`reversi-gateway [operator] --config CONFIG ...`: `args` come first (`operator`, or `--run-id RUN`)."""
    params = StdioServerParameters(command=GATEWAY, args=[*args, "--config", str(config), "--db", db, "-m",
                                                          str(manifest)], env=dict(os.environ), cwd=os.getcwd())
    return Client(params, cache=None)


@pytest.mark.anyio
async def test_the_gateway_sends_the_token_its_config_names_and_rolls_back_through_serve_http(
    http_server: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served_with(FakeStripe(), monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY) as fake:
        url = http_server("stripe")
        config, manifest, db = tmp_path / "gateway.yaml", tmp_path / "stripe.yaml", f"sqlite:///{tmp_path}/r.db"
        config.write_text(f"upstreams:\n  c: {{url: '{url}', token_env: REVERSI_CONNECTORS_TOKEN}}\n")
        manifest.write_text(connectors_cli("manifest", "stripe").out)
        async with _gateway(config, db, manifest, "--run-id", "run_pay") as agent:
            charge = await agent.call_tool("stripe.create_charge", {"amount": 500, "currency": "eur"})
            assert not charge.is_error and charge.structured_content is not None, charge.content
        async with _gateway(config, db, manifest, "operator") as operator:
            done = await operator.call_tool("reversi.execute_rollback", {"run_id": "run_pay", "confirm": True})
    assert done.structured_content is not None and done.structured_content["compensated"] == [0], done.content
    assert fake.charges[charge.structured_content["id"]]["refunded"] is True


def test_the_gateway_refuses_a_token_variable_that_is_not_set(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("upstreams:\n  c: {url: 'http://127.0.0.1:9/mcp', token_env: NOT_SET_ANYWHERE}\n")
    done = run_command([GATEWAY, "--config", str(config), "--db", f"sqlite:///{tmp_path}/r.db"])
    assert done.code == 1 and done.err.strip().splitlines()[-1] == "reversi-gateway: error: " + (
        "upstreams.c.token_env: NOT_SET_ANYWHERE is not set (it holds the bearer token for the upstream)"), done.err

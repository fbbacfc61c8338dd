"""The gateway in front of MCP servers nobody here wrote (the npm reference servers, 2025-11-25),
driven by the Python SDK's client in `auto`, `legacy` and `2026-07-28` modes and by the TypeScript
SDK's, over stdio and HTTP: what the agent sees is what the same calls made directly answer, byte
for byte except for what a revision translation changes (a 2026 agent gets `resultType`, the cache
hints and the gateway's envelope on the same results)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from tests.gateway.npm import (
    SAMPLED,
    PythonAgent,
    answers,
    everything_over_http,
    needs_node,
    server,
    through,
    ts_agent,
    untranslated,
    wait_for,
)

import reversi

pytestmark = [pytest.mark.anyio, needs_node]
MODES = ["auto", "legacy", "2026-07-28"]


def _call(name: str, **arguments: Any) -> types.CallToolRequest:
    return types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))


def _prompt(name: str, **arguments: str) -> types.GetPromptRequest:
    return types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))


def _read(uri: str) -> types.ReadResourceRequest:
    return types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))


EVERYTHING = [
    types.ListToolsRequest(),
    _call("echo", message="hi"),
    _call("get-sum", a=2, b=3),
    _call("get-sum", a="two"),  # invalid arguments: the server's own isError
    _call("get-structured-content", location="Chicago"),
    _call("get-annotated-message", messageType="error", includeImage=True),
    _call("get-tiny-image"),
    _call("get-resource-links", count=2),
    _call("nosuch"),  # an unknown tool: the server's own isError
    types.ListResourcesRequest(),
    types.ListResourceTemplatesRequest(),
    _read("demo://resource/static/document/architecture.md"),  # the dynamic ones say the time
    _read("nosuch://x"),  # a JSON-RPC error: code, message and data as the server sent them
    types.ListPromptsRequest(),
    _prompt("simple-prompt"),
    _prompt("args-prompt", city="Lyon", state="Rhône"),
    _prompt("nosuch"),
    types.CompleteRequest(
        params=types.CompleteRequestParams(
            ref=types.PromptReference(type="ref/prompt", name="completable-prompt"),
            argument=types.CompletionArgument(name="department", value="E"),
        )
    ),
]
MEMORY = [
    types.ListToolsRequest(),
    _call("create_entities", entities=[{"name": "ada", "entityType": "person", "observations": ["counts"]}]),
    _call("create_relations", relations=[{"from": "ada", "to": "ada", "relationType": "knows"}]),
    _call("add_observations", observations=[{"entityName": "ada", "contents": ["writes notes"]}]),
    _call("add_observations", observations=[{"entityName": "nobody", "contents": ["x"]}]),  # an error
    _call("search_nodes", query="notes"),
    _call("read_graph"),
    _call("delete_entities", entityNames=["ada"]),
]


def _filesystem(root: Path) -> list[Any]:
    return [
        types.ListToolsRequest(),
        _call("list_allowed_directories"),
        _call("write_file", path=str(root / "a.txt"), content="one\ntwo\n"),
        _call("read_text_file", path=str(root / "a.txt")),
        _call("edit_file", path=str(root / "a.txt"), edits=[{"oldText": "two", "newText": "2"}], dryRun=True),
        _call("list_directory", path=str(root)),
        _call("read_text_file", path="/etc/hostname"),  # outside the allowed directories: isError
        _call("create_directory", path=str(root / "sub")),
    ]


def _steps(db: str) -> list[tuple[str, str]]:
    with reversi.open(db) as ledger:
        run = ledger.list_runs()[0].run
        return [(s.tool, s.status.value) for s in ledger.get_run(run.run_id).steps()]


def _matches(direct: list[dict[str, Any]], gateway: list[dict[str, Any]], mode: str) -> None:
    """The gateway's answers are the direct ones (less, for a 2026 agent, what the translation adds)."""
    if mode == "legacy":
        assert gateway == direct
        return
    for want, got in zip(direct, gateway, strict=True):
        assert "error" in got or got["result"]["resultType"] == "complete"
        assert untranslated(got) == want


def _reset(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()


@pytest.mark.parametrize("mode", MODES)
async def test_a_2025_server_answers_an_agent_of_any_revision_through_the_gateway_as_it_answers_directly(
    tmp_path: Path, mode: str
) -> None:
    """Issue 13, item 1: a 2026 agent got -32603 on every call to a 2025 server, after the call ran
    and was journaled `succeeded`."""
    agent = PythonAgent()
    db = f"sqlite:///{tmp_path}/r.db"
    async with agent.stdio(server("everything"), "legacy") as plain:
        direct = await answers(plain, EVERYTHING)
    async with agent.stdio(through(server("everything"), db), mode) as client:
        assert (client.protocol_version >= "2026") is (mode != "legacy")
        gateway = await answers(client, EVERYTHING)
    _matches(direct, gateway, mode)
    assert gateway[8]["result"]["isError"] is True  # the unknown tool: the server's answer, not -32602
    assert gateway[12]["error"] == direct[12]["error"] and direct[12]["error"]["code"] == -32602
    journal = _steps(db)
    assert ("echo", "succeeded") in journal and ("get-structured-content", "succeeded") in journal
    assert ("nosuch", "failed") in journal and all(s != "uncertain" for _, s in journal)


@pytest.mark.parametrize("mode", MODES)
async def test_the_memory_and_filesystem_servers_answer_through_the_gateway_as_directly(
    tmp_path: Path, mode: str
) -> None:
    agent = PythonAgent()
    root = (tmp_path / "files").resolve()
    root.mkdir()
    for name, requests, command in (
        ("memory", MEMORY, server("memory")),
        ("filesystem", _filesystem(root), server("filesystem", str(root))),
    ):
        env = {"MEMORY_FILE_PATH": str(tmp_path / "direct.jsonl")}
        async with agent.stdio(command, "legacy", env) as plain:
            direct = await answers(plain, requests)
        _reset(root)
        env = {"MEMORY_FILE_PATH": str(tmp_path / "gateway.jsonl")}
        db = f"sqlite:///{tmp_path}/{name}.db"
        async with agent.stdio(through(command, db), mode, env) as client:
            gateway = await answers(client, requests)
        _matches(direct, gateway, mode)
        assert all(status in ("succeeded", "failed") for _, status in _steps(db))


async def test_a_2026_server_answers_a_2025_agent_through_the_gateway(tmp_path: Path, shop: Any) -> None:
    """The other way round: the Python test upstream speaks 2026-07-28 to the gateway, which answers
    a handshake agent without the 2026-only fields."""
    agent = PythonAgent()
    requests = [types.ListToolsRequest(), _call("echo", text="hi"), types.ListResourcesRequest()]
    async with agent.stdio(through(shop.flag().partition("=")[2].split(), f"sqlite:///{tmp_path}/r.db"), "legacy") as c:
        assert c.protocol_version < "2026"
        got = await answers(c, requests)
    assert all(not {"resultType", "ttlMs", "cacheScope"} & set(a["result"]) for a in got)
    assert got[1]["result"]["content"] == [{"type": "text", "text": "hi"}]


# What server-everything asks the agent for, sorted: it asks for the roots once, 350 ms after the
# handshake (its syncRoots timer) or for get-roots-list if that comes first; on a loaded machine
# either may, so the order of the three varies.
EVERYTHING_ASKS = sorted(["sampling/createMessage", "elicitation/create", "roots/list"])

@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sampling_elicitation_and_roots_reach_a_handshake_agent(tmp_path: Path, mode: str) -> None:
    """Issue 13, item 2: the upstream's own requests never reached the agent, and server-everything
    offered the tools that need them only when asked directly. A stateless 2026 agent cannot be
    asked: the upstream is answered -32601, which it reports in its result."""
    requests = [
        types.ListToolsRequest(),
        _call("trigger-sampling-request", prompt="a haiku"),
        _call("trigger-elicitation-request"),
        _call("get-roots-list"),
    ]
    direct_agent, agent = PythonAgent(["file:///srv/a"]), PythonAgent(["file:///srv/a"])
    async with direct_agent.stdio(server("everything"), "legacy") as plain:
        direct = await answers(plain, requests)
    async with agent.stdio(through(server("everything"), f"sqlite:///{tmp_path}/r.db"), mode) as client:
        gateway = await answers(client, requests)
    tools = [t["name"] for t in gateway[0]["result"]["tools"]]
    assert tools == [t["name"] for t in direct[0]["result"]["tools"]]
    assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= set(tools)
    if mode == "legacy":
        assert gateway == direct
        assert SAMPLED in gateway[1]["result"]["content"][0]["text"]
        assert sorted(agent.asked) == sorted(direct_agent.asked) == EVERYTHING_ASKS
    else:
        assert "not relayed" in gateway[1]["result"]["content"][0]["text"]
        assert agent.asked == []


async def test_the_filesystem_server_without_directories_gets_the_agents_roots(tmp_path: Path) -> None:
    """server-filesystem started without directories asks the client for its roots: the agent's."""
    root = (tmp_path / "files").resolve()
    root.mkdir()
    agent = PythonAgent([root.as_uri()])

    async with agent.stdio(through(server("filesystem"), f"sqlite:///{tmp_path}/r.db"), "legacy") as client:

        async def allowed() -> str | None:
            text = (await client.call_tool("list_allowed_directories", {})).content[0].text  # type: ignore[union-attr]
            return text if str(root) in text else None

        await wait_for(allowed, "the upstream to take the agent's roots")
        written = await client.call_tool("write_file", {"path": str(root / "x.txt"), "content": "hi"})
    assert not written.is_error and (root / "x.txt").read_text() == "hi"
    assert "roots/list" in agent.asked


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_of_an_npm_server_reaches_the_agent(tmp_path: Path, mode: str) -> None:
    request = [_call("trigger-long-running-operation", duration=0.3, steps=3)]
    direct_agent, agent = PythonAgent(), PythonAgent()
    async with direct_agent.stdio(server("everything"), "legacy") as plain:
        direct = await answers(plain, request, direct_agent.on_progress)
    async with agent.stdio(through(server("everything"), f"sqlite:///{tmp_path}/r.db"), mode) as client:
        gateway = await answers(client, request, agent.on_progress)
    _matches(direct, gateway, mode)
    steps = [(1.0, 3.0, None), (2.0, 3.0, None), (3.0, 3.0, None)]  # the last may come after the result
    for seen in (direct_agent.progress, agent.progress):
        assert len(seen) >= 2 and seen == steps[: len(seen)]


class _Sent(types.Request[dict[str, Any] | None, str]):
    """A request with fields the SDK's models do not name."""


async def test_a_vendors_own_fields_reach_the_agent_exactly(tmp_path: Path) -> None:
    """Issue 13, item 3: unknown top-level fields of a result were dropped (the gateway re-serialised
    the SDK's model of it); so were those of a request on its way up."""
    command = [sys.executable, str(Path(__file__).parent / "raw_server.py")]
    asked = _Sent(method="tools/call", params={"name": "params", "arguments": {"a": None}, "vendorParam": 7})
    requests = [types.ListToolsRequest(), _call("vendor"), _call("nosuch"), asked]
    for mode in ("legacy", "auto"):
        agent = PythonAgent()
        async with agent.stdio(command, "legacy") as plain:
            direct = await answers(plain, requests)
        async with agent.stdio(through(command, f"sqlite:///{tmp_path}/{mode}.db"), mode) as client:
            gateway = await answers(client, requests)
        assert direct[1]["result"]["vendorField"] == {"kept": [1, 2]}
        assert direct[0]["result"]["tools"][0]["x-vendor"] == "listed as sent"
        assert json.loads(direct[3]["result"]["content"][0]["text"]) == {
            "name": "params", "arguments": {"a": None}, "vendorParam": 7}
        _matches(direct, gateway, mode)  # and the upstream was sent no protocol key of the agent's


# -- the TypeScript SDK's client ------------------------------------------------------------------

TS_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("tools/list", {}),
    ("tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
    ("tools/call", {"name": "get-structured-content", "arguments": {"location": "Chicago"}}),
    ("tools/call", {"name": "nosuch", "arguments": {}}),
    ("tools/call", {"name": "trigger-sampling-request", "arguments": {"prompt": "x"}}),
    ("tools/call", {"name": "trigger-elicitation-request", "arguments": {}}),
    ("tools/call", {"name": "get-roots-list", "arguments": {}}),
    ("tools/call", {"name": "trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}}),
    ("resources/read", {"uri": "demo://resource/static/document/architecture.md"}),
    ("resources/read", {"uri": "nosuch://x"}),
    ("prompts/get", {"name": "args-prompt", "arguments": {"city": "Lyon"}}),
    ("prompts/get", {"name": "nosuch"}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
                             "argument": {"name": "department", "value": "E"}}),
]


async def test_the_typescript_client_sees_through_the_gateway_on_stdio_what_it_sees_directly(tmp_path: Path) -> None:
    direct = ts_agent(server("everything"), TS_REQUESTS, "file:///srv/ts")
    gateway = ts_agent(through(server("everything"), f"sqlite:///{tmp_path}/r.db"), TS_REQUESTS, "file:///srv/ts")
    assert gateway["answers"] == direct["answers"]
    assert sorted(gateway["asked"]) == sorted(direct["asked"]) == EVERYTHING_ASKS
    assert gateway["serverInfo"] == direct["serverInfo"]
    steps = [[1, 3, None], [2, 3, None], [3, 3, None]]  # the last may come after the result, and be dropped
    for seen in (direct["progress"], gateway["progress"]):
        assert len(seen) >= 2 and seen == steps[: len(seen)]


def _wire(request: Any) -> tuple[str, dict[str, Any]]:
    return request.method, request.params.model_dump(by_alias=True, exclude_none=True) if request.params else {}


async def test_the_typescript_client_sees_memory_and_filesystem_through_the_gateway_as_directly(
    tmp_path: Path,
) -> None:
    root = (tmp_path / "files").resolve()
    root.mkdir()
    for name, requests, command in (
        ("memory", MEMORY, server("memory")),
        ("filesystem", _filesystem(root), server("filesystem", str(root))),
    ):
        wire = [_wire(r) for r in requests]
        direct = ts_agent(command, wire, env={"MEMORY_FILE_PATH": str(tmp_path / "direct.jsonl")})
        _reset(root)
        gateway = ts_agent(through(command, f"sqlite:///{tmp_path}/{name}.db"), wire,
                           env={"MEMORY_FILE_PATH": str(tmp_path / "gateway.jsonl")})
        assert gateway["answers"] == direct["answers"], name
        assert all("error" not in a for a in gateway["answers"]), name


# -- over HTTP --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_python_agents_over_http_through_the_gateway_see_what_they_see_directly(
    tmp_path: Path, serve: Callable[..., str], mode: str
) -> None:
    agent = PythonAgent()
    async with agent.stdio(server("everything"), "legacy") as plain:
        direct = await answers(plain, EVERYTHING)
    base = serve("--upstream", f"up={' '.join(server('everything'))}", "--db", f"sqlite:///{tmp_path}/r.db")
    async with agent.http(f"{base}/mcp", mode) as client:
        gateway = await answers(client, EVERYTHING)
    _matches(direct, gateway, mode)


async def test_an_http_upstream_and_an_http_agent_with_sampling_on_its_session(
    tmp_path: Path, serve: Callable[..., str]
) -> None:
    """server-everything over streamable HTTP behind the gateway over HTTP; a handshake session is
    asked the upstream's own requests too."""
    requests = [types.ListToolsRequest(), _call("echo", message="hi"), _call("trigger-sampling-request", prompt="x")]
    with everything_over_http() as url:
        direct_agent, agent = PythonAgent(), PythonAgent()
        async with direct_agent.http(url, "legacy") as plain:
            direct = await answers(plain, requests)
        base = serve("--upstream", f"up={url}", "--db", f"sqlite:///{tmp_path}/r.db")
        async with agent.http(f"{base}/mcp", "legacy") as client:
            gateway = await answers(client, requests)
        ts = ts_agent(f"{base}/mcp", [_wire(r) for r in requests])
    assert gateway == direct
    assert SAMPLED in gateway[2]["result"]["content"][0]["text"]
    # server-everything also asks for the client's roots 350 ms after the handshake (server/index.js's
    # syncRoots timer): on a loaded machine the session lives that long, and the request is relayed too.
    assert [m for m in agent.asked if m != "roots/list"] == ["sampling/createMessage"]
    assert ts["answers"][1]["result"] == direct[1]["result"]
    assert "sampled by ts" in ts["answers"][2]["result"]["content"][0]["text"]


async def test_a_call_the_journal_says_succeeded_is_never_answered_as_failed(tmp_path: Path) -> None:
    """What item 1 cost: the agent was told -32603, so it retried a call that had run."""
    db = f"sqlite:///{tmp_path}/r.db"
    async with PythonAgent().stdio(through(server("memory"), db), "auto",
                                   {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}) as client:
        try:
            answered = await client.call_tool("create_entities", {"entities": [
                {"name": "x", "entityType": "t", "observations": []}]})
        except MCPError as exc:
            pytest.fail(f"the call ran, and the agent was told {exc.code} {exc.message}")
    assert not answered.is_error
    assert _steps(db) == [("create_entities", "succeeded")]

"""`reversi-gateway` warns at start, one line per problem, when the manifests in force do not fit the
upstream's tools (the checks of `reversi manifest check --upstream`), and serves all the same."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from tests.cli.test_manifest_live import MISTAKES, MISTAKES_FOUND
from tests.gateway.conftest import gateway
from tests.gateway.npm import needs_node, server, through

import reversi.manifests

FIT = "reversi-gateway: the manifest does not fit the upstream's tools: "


@needs_node
@pytest.mark.anyio
@pytest.mark.parametrize("operator", [False, True], ids=["agent", "operator"])
async def test_the_gateway_says_how_the_manifest_does_not_fit_server_memory_and_serves(
    tmp_path: Path, operator: bool
) -> None:
    manifest = tmp_path / "mistakes.yaml"
    manifest.write_text(MISTAKES)
    flags = through(server("memory"), f"sqlite:///{tmp_path}/r.db", "-m", str(manifest))[1:]
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    with (tmp_path / "stderr").open("w") as errlog:
        async with gateway(*(["operator"] if operator else []), *flags, env=env, errlog=errlog) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert ("reversi.list_runs" if operator else "read_graph") in names
    said = [line.removeprefix(FIT) for line in (tmp_path / "stderr").read_text().splitlines()
            if line.startswith(FIT)]
    assert said == [line.format(m=manifest) for line in MISTAKES_FOUND]


@needs_node
@pytest.mark.anyio
async def test_with_two_upstreams_a_manifest_without_prefixes_is_named_once_with_the_way_to_prefix_it(
    tmp_path: Path
) -> None:
    memory = shlex.join(server("memory"))
    files = shlex.join(server("filesystem", str(tmp_path)))
    shipped = str(reversi.manifests.path("memory"))
    flags = ["--upstream", f"mem={memory}", "--upstream", f"files={files}", "--db", f"sqlite:///{tmp_path}/r.db",
             "-m", shipped]
    with (tmp_path / "stderr").open("w") as errlog:
        async with gateway(*flags, env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}, errlog=errlog) as client:
            assert "mem.read_graph" in [tool.name for tool in (await client.list_tools()).tools]
    said = (tmp_path / "stderr").read_text().splitlines()
    hints = [line for line in said if "without their upstream's prefix" in line]
    assert hints == [
        "reversi-gateway: the manifests name 9 tool(s) without their upstream's prefix (read_graph is served as "
        "mem.read_graph): with several upstreams each tool is UPSTREAM.TOOL; `reversi manifest show NAME --prefix "
        "UPSTREAM` prints a shipped manifest so"]

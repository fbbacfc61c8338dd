"""`reversi-gateway` warns at start, one line per problem, when the manifests in force do not fit the
upstream's tools (the checks of `reversi manifest check --upstream`), and serves all the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli.test_manifest_live import MISTAKES, MISTAKES_FOUND
from tests.gateway.conftest import gateway
from tests.gateway.npm import needs_node, server, through

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

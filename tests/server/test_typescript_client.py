"""The TypeScript client (clients/typescript/) against a real `reversi-server`, on both stores: built with
`tsc` and tested with node's own test runner, the AI SDK's offline mock model driving its journaled
tools. Its types are the server's OpenAPI document's: a route or body changed without `npm run schema`
fails here. Node and npm are needed (they are on the machines CI runs on); without them the test says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.server.conftest import Site

from reversi.server.api import ENDPOINTS
from reversi.server.openapi import openapi_document

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
UNDO = f"{sys.executable} -c \"import json, sys; print(json.dumps({{'undone': json.load(sys.stdin)['tool']}}))\""
INSTALL_S = 600


def _npm(*args: str, env: dict[str, str] | None = None, timeout: float = INSTALL_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["npm", *args], cwd=CLIENT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.fixture(scope="module")
def built() -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed for the TypeScript client's tests")
    if not (CLIENT / "node_modules" / ".package-lock.json").exists():
        installed = _npm("ci", "--no-audit", "--no-fund", "--loglevel=error")
        assert installed.returncode == 0, installed.stderr
    done = _npm("run", "build")
    assert done.returncode == 0, done.stdout + done.stderr
    return CLIENT


def test_the_clients_types_are_the_servers_document(built: Path, tmp_path: Path) -> None:
    document = openapi_document(ENDPOINTS)
    assert json.loads((built / "openapi.json").read_text()) == document, "run `make client`: the API changed"
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    made = subprocess.run([str(built / "node_modules" / ".bin" / "openapi-typescript"), str(tmp_path / "openapi.json"),
                           "-o", str(tmp_path / "schema.ts"), "--default-non-nullable", "false"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "schema.ts").read_text() == (built / "src" / "schema.ts").read_text()


def test_the_client_and_its_ai_sdk_tools_against_a_real_server(built: Path, make_site: Callable[..., Site]) -> None:
    site = make_site(compensator_cmd=UNDO)
    site.add_key("agent", "agent", "acme")
    site.add_key("operator", "operator", "acme")
    env = {"REVERSI_URL": site.url, "REVERSI_AGENT_KEY": site.keys["agent"],
           "REVERSI_OPERATOR_KEY": site.keys["operator"]}
    done = _npm("test", env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# pass 4" in done.stdout, done.stdout[-2000:]

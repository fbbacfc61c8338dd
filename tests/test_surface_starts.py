"""How each program starts and says who it is: an address in use is one line of error, every program
has `--version`, `/healthz` has one shape, and the operator's help lists only what it takes."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

BIN = Path(sys.executable).parent
UPSTREAM = Path(__file__).parent / "gateway" / "upstream_server.py"
WAIT_S = 60


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as held:
        yield held.getsockname()[1]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, timeout=WAIT_S,
                          stdin=subprocess.DEVNULL, check=False)


def test_the_server_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, taken_port: int) -> None:
    done = _run(str(BIN / "reversi-server"), "--port", str(taken_port), "--db", f"sqlite:///{tmp_path}/r.db",
                cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"reversi-server: error: cannot listen on 127.0.0.1:{taken_port}: Address already in use"]


def test_the_gateway_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, taken_port: int) -> None:
    upstream = "shop=" + shlex.join([sys.executable, str(UPSTREAM), str(tmp_path / "shop")])
    done = _run(str(BIN / "reversi-gateway"), "--upstream", upstream, "--http", f"127.0.0.1:{taken_port}",
                "--db", f"sqlite:///{tmp_path}/r.db", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"reversi-gateway: error: cannot listen on 127.0.0.1:{taken_port}: Address already in use")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("program", ["reversi", "reversi-server", "reversi-gateway", "reversi-connectors"])
def test_every_program_says_its_version(tmp_path: Path, program: str) -> None:
    done = _run(str(BIN / program), "--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"{program}, version {version('reversi-undo')}\n")


def test_the_operators_help_lists_only_the_flags_it_takes_and_refuses_the_others(tmp_path: Path) -> None:
    shown = _run(str(BIN / "reversi-gateway"), "operator", "--help", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: reversi-gateway operator")
    for flag in ("--http", "--run-id", "--session-idle-timeout", "--checkpoint-tool", "--actor", "--tenant",
                 "--environment", "--mode"):
        assert flag not in shown.stdout
    refused = _run(str(BIN / "reversi-gateway"), "operator", "--upstream", "x=true", "--actor", "ana", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.splitlines() == [
        "reversi-gateway: error: `reversi-gateway operator` serves one operator on stdio and journals no run: "
        "drop --actor (over HTTP the operator tools are at /operator/mcp of `reversi-gateway --http`)"]


def test_healthz_has_one_shape_on_the_server_and_the_gateway(tmp_path: Path) -> None:
    upstream = "shop=" + shlex.join([sys.executable, str(UPSTREAM), str(tmp_path / "shop")])
    commands = {
        "server": [str(BIN / "reversi-server"), "--port", "0", "--db", f"sqlite:///{tmp_path}/s.db"],
        "gateway": [str(BIN / "reversi-gateway"), "--upstream", upstream, "--http", "127.0.0.1:0",
                    "--db", f"sqlite:///{tmp_path}/g.db"],
    }
    seen = {}
    for name, command in commands.items():
        with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                              stdin=subprocess.DEVNULL, cwd=tmp_path) as process:
            try:
                assert process.stderr is not None
                for line in process.stderr:  # each says where it listens once it does
                    if "listening on http://" in line or "serving http://" in line:
                        url = line.split("http://", 1)[1].split()[0].split("/")[0]
                        break
                else:
                    pytest.fail(f"{name} never said where it listens")
                seen[name] = httpx.get(f"http://{url}/healthz", timeout=WAIT_S).json()
            finally:
                process.terminate()
    for health in seen.values():
        assert (health["status"], health["version"]) == ("ok", version("reversi-undo"))
    assert json.dumps(seen["gateway"]["upstreams"]["shop"]["tools"]) != "0"

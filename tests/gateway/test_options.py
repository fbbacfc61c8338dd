"""Upstreams from flags and from the config file, and the gateway started from a config file."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tests.gateway.conftest import GATEWAY, UPSTREAM, WAIT_S, Shop, gateway

import reversi
from reversi.errors import ConfigError
from reversi.gateway.options import UpstreamSpec, parse_http, parse_upstream_flag, upstreams_from_config
from reversi.gateway.upstream import Upstream


def test_an_upstream_flag_is_a_command_split_without_a_shell_or_a_url() -> None:
    split = parse_upstream_flag("gh=npx -y 'server github'")
    assert split == UpstreamSpec("gh", command=("npx", "-y", "server github"))
    url = "https://crm.example.com/mcp"
    assert parse_upstream_flag(f"crm={url}") == UpstreamSpec("crm", url=url)
    for bad in ("no-name", "a.b=cmd", "x=", "x='unclosed"):
        with pytest.raises(ConfigError):
            parse_upstream_flag(bad)


def test_config_upstreams_take_commands_urls_lists_and_mappings() -> None:
    found = upstreams_from_config(
        {
            "a": "python srv.py --flag",
            "b": "http://127.0.0.1:9/mcp",
            "c": ["python", "x y.py"],
            "d": {"command": "python", "args": ["d.py"], "env": {"K": "v"}, "cwd": "srv"},
        },
        base="/etc/reversi",
    )
    assert found == (
        UpstreamSpec("a", command=("python", "srv.py", "--flag")),
        UpstreamSpec("b", url="http://127.0.0.1:9/mcp"),
        UpstreamSpec("c", command=("python", "x y.py")),
        UpstreamSpec("d", command=("python", "d.py"), env={"K": "v"}, cwd="/etc/reversi/srv"),
    )
    for bad in (["a=b"], {"a": {"shell": "x"}}, {"a": {"command": 3}}, {"a": {"url": "ftp://x"}}):
        with pytest.raises(ConfigError):
            upstreams_from_config(bad)
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    with pytest.raises(ConfigError):
        parse_http("8765")


@pytest.mark.anyio
async def test_the_gateway_takes_its_upstreams_and_store_from_a_config_file(tmp_path: Path, shop: Shop) -> None:
    command = shlex.join([sys.executable, str(UPSTREAM), str(shop.state)])
    config = tmp_path / "conf" / "gateway.yaml"
    config.parent.mkdir()
    config.write_text(f"db: sqlite:///{tmp_path}/c.db\nupstreams:\n  shop: {command!r}\n")
    async with gateway("--config", str(config), "--run-id", "run_conf") as agent:
        assert (await agent.call_tool("echo", {"text": "configured"})).content[0].text == "configured"  # type: ignore[union-attr]
    with reversi.open(f"sqlite:///{tmp_path}/c.db") as ledger:
        assert [s.tool for s in ledger.get_run("run_conf").steps()] == ["echo"]


@pytest.mark.parametrize("flag", [["--http", "127.0.0.1:0"], ["--run-id", "run_x"]])
def test_the_operator_refuses_flags_it_would_ignore(tmp_path: Path, shop: Shop, flag: list[str]) -> None:
    done = subprocess.run(
        [str(GATEWAY), "operator", "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db", *flag],
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert "`reversi-gateway operator` serves one operator on stdio" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--run-id", "bad id"], {}, "reversi-gateway: error: malformed run id 'bad id'"),
    (["--run-id", "run_theirs"], {"REVERSI_PRINCIPAL": "mallory"}, "reversi-gateway: error: run_theirs belongs to "
                                                                      "another principal"),
    (["--call-timeout", "nan"], {}, "reversi-gateway: error: --call-timeout must be a positive number of seconds"),
])
def test_what_stops_the_gateway_at_start_is_one_line(
    tmp_path: Path, shop: Shop, args: list[str], env: dict[str, str], message: str
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        ledger.start_run(run_id="run_theirs")  # opened by `local`
    done = subprocess.run(
        [str(GATEWAY), "--upstream", shop.flag(), "--db", db, *args], env={**os.environ, **env},
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1].startswith(message), done.stderr


@pytest.mark.anyio
async def test_an_upstream_that_never_finishes_starting_is_given_up_on(tmp_path: Path) -> None:
    """A server that never answers `initialize` must not keep the gateway from serving."""
    hung = Upstream(UpstreamSpec("hung", command=(sys.executable, "-c", "import time; time.sleep(60)")),
                    start_timeout=0.5)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hung.supervise)
        with anyio.fail_after(WAIT_S):
            await hung.started()
        tg.cancel_scope.cancel()
    assert not hung.connected and hung.last_error == "it did not finish starting within 0.5 s"


def test_the_gateway_tells_its_version_as_the_cli_does() -> None:
    from importlib.metadata import version

    said = subprocess.run([str(GATEWAY), "--version"], capture_output=True, text=True, timeout=WAIT_S, check=False)
    cli = subprocess.run([str(GATEWAY.parent / "reversi"), "--version"], capture_output=True, text=True,
                         timeout=WAIT_S, check=False)
    shown = version("reversi-undo")
    assert (said.returncode, said.stdout, said.stderr) == (0, f"reversi-gateway, version {shown}\n", "")
    assert cli.stdout == f"reversi, version {version('reversi-undo')}\n"

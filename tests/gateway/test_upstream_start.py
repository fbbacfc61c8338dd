"""An upstream that cannot start (issue 12): with no upstream left to serve, the gateway and the operator
stop at start with the upstream's own error; with others left, they serve those and say which one
failed."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from tests.gateway.conftest import GATEWAY, WAIT_S, Shop, gateway

from reversi.errors import ConfigError
from reversi.gateway.options import UpstreamSpec, parse_upstream_flag
from reversi.gateway.upstream import UpstreamPool

CANNOT_RUN = "x=/nonexistent/cmd"
EXITS_AT_ONCE = "x=" + shlex.join([
    sys.executable, "-c", "import sys; print('starting the shop', file=sys.stderr); sys.exit('SHOP_TOKEN is not set')"
])
HANGS = "import sys, time; print('fetching the server', file=sys.stderr, flush=True); time.sleep(60)"
MODES = {"stdio": [], "http": ["--http", "127.0.0.1:0"], "operator": ["operator"]}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("upstream", "why"), [
    pytest.param(CANNOT_RUN, "/nonexistent/cmd: No such file or directory", id="cannot-run"),
    pytest.param(EXITS_AT_ONCE, "SHOP_TOKEN is not set", id="exits-at-once"),
])
def test_a_gateway_whose_only_upstream_cannot_start_stops_with_the_upstreams_error(
    tmp_path: Path, mode: str, upstream: str, why: str
) -> None:
    done = subprocess.run(
        [str(GATEWAY), *MODES[mode], "--upstream", upstream, "--db", f"sqlite:///{tmp_path}/r.db"],
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"reversi-gateway: error: upstream x could not start: {why}"]


@pytest.mark.anyio
async def test_a_gateway_serves_the_upstreams_that_start_and_says_which_one_did_not(
    tmp_path: Path, shops: Callable[[str], Shop]
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with (tmp_path / "stderr").open("w") as errlog:
        async with gateway("--upstream", shops("a").flag(), "--upstream", CANNOT_RUN, "--db", db,
                           errlog=errlog) as agent:
            names = [t.name for t in (await agent.list_tools()).tools]
            assert "a.echo" in names and not [n for n in names if n.startswith("x.")]
            assert (await agent.call_tool("a.echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
    said = (tmp_path / "stderr").read_text().splitlines()
    assert "reversi-gateway: upstream x could not start: /nonexistent/cmd: No such file or directory; serving " \
           "the others, and trying it again" in said, said


@pytest.mark.anyio
async def test_an_upstream_that_hangs_at_start_counts_as_not_started_once_its_start_timeout_passes(
    shops: Callable[[str], Shop]
) -> None:
    hung = UpstreamSpec("hung", command=(sys.executable, "-c", HANGS))
    alone, beside = UpstreamPool((hung,)), UpstreamPool((hung, parse_upstream_flag(shops("a").flag())))
    for pool in (alone, beside):
        pool.upstreams[0].start_timeout = 2.0
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(WAIT_S), pytest.raises(ConfigError) as stopped:
            await alone.start(tg)
        with anyio.fail_after(WAIT_S):
            await beside.start(tg)
        assert [t.name for t in beside.tools() if t.name.startswith("a.")]
        tg.cancel_scope.cancel()
    assert stopped.value.message == "upstream hung could not start: it did not finish starting within 2 s " \
                                    "(its last line on stderr: fetching the server)"

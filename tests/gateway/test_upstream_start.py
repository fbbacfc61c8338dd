"""An upstream that cannot start (issue 12): with no upstream left to serve, the gateway and the operator
stop at start with the upstream's own error; with others left, they serve those and say which one
failed. The operator also warns when an upstream offers none of the compensations the manifests name."""

from __future__ import annotations

import re
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
NO_COMPENSATION_MANIFEST = """\
version: 1
tools:
  create_order:
    compensation:
      tool: refund_order
      args: {order_id: "$args.order_id"}
      kind: compensation
"""
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


def _no_compensation_manifest(tmp_path: Path) -> str:
    path = tmp_path / "refunds.yaml"
    path.write_text(NO_COMPENSATION_MANIFEST)
    return str(path)


WARNING = re.compile(r"reversi-gateway: upstream shop offers none of the compensation tools the manifests name "
                     r"for its tools \(refund_order\): ")
FIT = "reversi-gateway: the manifest does not fit the upstream's tools: "  # tests/gateway/test_manifest_fit.py


def besides_fit(lines: list[str]) -> list[str]:
    """What the gateway said at start, less how the manifests do not fit the upstreams' tools."""
    return [line for line in lines if not line.startswith(FIT)]


@pytest.mark.anyio
async def test_an_operator_warns_once_when_its_upstream_offers_none_of_the_compensations_named(
    tmp_path: Path, shop: Shop, shop_manifest: str
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    said: dict[str, list[str]] = {}
    for manifest in (_no_compensation_manifest(tmp_path), shop_manifest):
        with (tmp_path / "stderr").open("w") as errlog:
            async with gateway("operator", "--upstream", shop.flag(), "--db", db, "-m", manifest,
                               errlog=errlog) as operator:
                assert not (await operator.call_tool("reversi.list_runs", {})).is_error
        said[manifest] = besides_fit((tmp_path / "stderr").read_text().splitlines())
    warned = said[_no_compensation_manifest(tmp_path)]
    assert len([line for line in warned if WARNING.match(line)]) == 1 and len(warned) == 1, warned
    assert not said[shop_manifest], said[shop_manifest]  # cancel_order is there: nothing to say


@pytest.mark.anyio
async def test_with_several_upstreams_the_operator_checks_each_against_the_compensations_named_for_its_own_tools(
    tmp_path: Path, shops: Callable[[str], Shop]
) -> None:
    manifest = tmp_path / "two.yaml"
    manifest.write_text(NO_COMPENSATION_MANIFEST.replace("create_order", "b.create_order")
                        .replace("refund_order", "b.refund_order")
                        + "  a.create_order:\n    compensation: {tool: a.cancel_order, kind: inverse}\n")
    with (tmp_path / "stderr").open("w") as errlog:
        async with gateway("operator", "--upstream", shops("a").flag(), "--upstream", shops("b").flag(),
                           "--db", f"sqlite:///{tmp_path}/r.db", "-m", str(manifest), errlog=errlog) as operator:
            assert not (await operator.call_tool("reversi.list_runs", {})).is_error
    said = besides_fit((tmp_path / "stderr").read_text().splitlines())
    assert len(said) == 1 and said[0].startswith("reversi-gateway: upstream b offers none of the compensation "
                                                 "tools the manifests name for its tools (b.refund_order): "), said


def test_a_gateway_over_http_warns_before_serving_its_operator_endpoint(tmp_path: Path, shop: Shop) -> None:
    proc = subprocess.Popen(
        [str(GATEWAY), "--http", "127.0.0.1:0", "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db",
         "-m", _no_compensation_manifest(tmp_path)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        before: list[str] = []
        while not (line := proc.stderr.readline()).startswith("reversi-gateway: serving"):
            assert line, f"the gateway stopped: {before}"
            before.append(line.rstrip("\n"))
        assert [line for line in before if WARNING.match(line)], before
    finally:
        proc.kill()
        proc.wait(WAIT_S)


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

"""Without keys, a loopback request acts as the admin `local` only if a browser did not send it from a
page of another origin: another loopback port is another site (a dev server, a local tool's page), so
only an `Origin` equal to the server's own (scheme, host and the port it listens on) is `local`.
The same rule holds for `reversi-server` and for `reversi-gateway --http`."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.gateway.http_wire import GatewayProcess
from tests.hostile.mcp_messages import gateway_flags
from tests.server.conftest import Site
from tests.server.raw_http import address, status

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}).encode()
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def free_port() -> int:
    """A loopback port nothing listens on: the origin of a page served elsewhere on this machine."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def origins(url: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Headers of requests that are the server's own origin, and of requests from another origin."""
    host, port = address(url)
    other = free_port()
    own = [{"Origin": f"http://{host}:{port}"},
           {"Origin": f"http://localhost:{port}", "Host": f"localhost:{port}"},
           {}]  # no Origin: not a browser
    foreign = [{"Origin": f"http://{host}:{other}"}, {"Origin": f"http://localhost:{other}"},
               {"Origin": f"http://[::1]:{other}"}, {"Origin": f"http://{host}:{other}", "Host": f"{host}:{other}"},
               {"Origin": f"https://{host}:{port}"}, {"Origin": f"http://{host}"},
               {"Origin": f"http://localhost:{port}"},  # a page of localhost:PORT is not the page of 127.0.0.1:PORT
               {"Origin": f"http://{host}:{port}/"}, {"Origin": f"http://user@{host}:{port}"},
               {"Origin": f"http://{host}:{port}", "Host": f"{host}:{other}"}]
    return own, foreign


def test_the_server_without_keys_is_local_only_for_its_own_origin(make_site: Callable[..., Site]) -> None:
    site = make_site()
    own, foreign = origins(site.url)
    for headers in own:
        assert status(site.url, "GET", "/v1/halts", headers) == 200, headers
        assert status(site.url, "GET", "/halts", headers) == 200, headers
    for headers in foreign:
        assert status(site.url, "POST", "/v1/halt", headers, b'{"reason": "from a page"}') == 401, headers
        assert status(site.url, "GET", "/halts", headers) == 303, headers  # to the sign-in page
    assert site.ledger.halts() == []


@pytest.fixture
def keyless_gateway(tmp_path: Path) -> Iterator[str]:
    """`reversi-gateway --http 127.0.0.1:0` over a store without keys; its base URL."""
    _, _, flags = gateway_flags(tmp_path)
    gateway = GatewayProcess(flags, tmp_path / "gateway.log")
    yield gateway.url
    gateway.stop()


def test_the_gateway_without_keys_is_local_only_for_its_own_origin(keyless_gateway: str) -> None:
    own, foreign = origins(keyless_gateway)
    for path in ("/mcp", "/operator/mcp"):
        for headers in own:
            assert status(keyless_gateway, "POST", path, MCP_HEADERS | headers, INITIALIZE) == 200, (path, headers)
        for headers in foreign:
            assert status(keyless_gateway, "POST", path, MCP_HEADERS | headers, INITIALIZE) == 401, (path, headers)

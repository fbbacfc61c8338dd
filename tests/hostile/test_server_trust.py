"""Hostile inputs at the server's trust boundaries (issue 24): key names made to pass for `local`,
`Origin` and `Host` headers made to pass for the server's own without keys, and bodies cut off at
random points, with and without a key.

* No key an admin can mint continues a run the CLI and SDK opened as `local`.
* Without keys, a request acts as `local` only when it carries no `Origin`, or exactly the server's
  own (the scheme and host it was addressed to, the port it listens on); the gateway keeps the rule.
* A body cut off anywhere leaves no traceback in the server's log, and at most one line.
"""

from __future__ import annotations

import signal
import string
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.gateway.http_wire import GatewayProcess
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.mcp_messages import gateway_flags
from tests.server.conftest import WAIT_S, ServerProcess, ThreadServer
from tests.server.raw_http import address, send_cut_off, status

import reversi
from reversi.engine.keys import create_key
from reversi.server import create_app

# -- key names around `local` ------------------------------------------------------------------------

# Each letter of `local` as itself, in upper case, full width, or a look-alike from another script.
LETTERS = {c: [c, c.upper(), chr(ord(c) - ord("a") + 0xFF41), chr(ord(c) - ord("a") + 0xFF21)] for c in "local"}
LETTERS["o"] += ["\u043e", "\u03bf", "0"]  # Cyrillic and Greek o, a zero
LETTERS["c"] += ["\u0441"]  # Cyrillic es
LETTERS["a"] += ["\u0430"]  # Cyrillic a
LETTERS["l"] += ["\u04cf", "1", "I"]  # Cyrillic palochka, one, capital i
PADDING = st.text(alphabet=" \t\n\u00a0\u2003\u200b\u200d\ufeff._-@", max_size=3)
LOOKALIKE = st.tuples(PADDING, *(st.sampled_from(LETTERS[c]) for c in "local"), PADDING).map("".join)
NAMES = st.one_of(LOOKALIKE, st.text(max_size=12), st.sampled_from(["local", "LOCAL", " Local ", "ｌｏｃａｌ"]))


@pytest.fixture
def keyed_site(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A server with an admin key over a store where `local` opened `run_of_local`: (url, headers)."""
    ledger = reversi.open(f"sqlite:///{tmp_path}/trust.db")
    ledger.start_run("run_of_local")
    _, key = create_key(ledger.store, "root", "admin")
    server = ThreadServer(create_app(ledger, compensator_cmd=None, run_jobs=False))
    try:
        yield server.url, {"Authorization": f"Bearer {key}"}
    finally:
        server.stop()
        ledger.close()


def test_no_key_name_an_admin_can_mint_continues_the_runs_of_local(keyed_site: tuple[str, dict[str, str]]) -> None:
    url, admin = keyed_site
    with httpx.Client(base_url=url, timeout=WAIT_S) as http:

        @fuzz_settings(ci=80)
        @given(NAMES)
        def mint(name: str) -> None:
            tried("server_trust.key_names")
            made = http.post("/v1/keys", json={"name": name, "role": "agent"}, headers=admin)
            assert made.status_code in (201, 400, 409), (name, made.status_code, made.text)
            if made.status_code != 201:
                return
            assert unicodedata.normalize("NFKC", name).strip().casefold() != "local", name
            continued = http.post("/v1/runs", json={}, headers={"Authorization": f"Bearer {made.json()['key']}",
                                                                "Reversi-Run-Id": "run_of_local"})
            assert continued.status_code == 403, (name, continued.status_code, continued.text)

        mint()


# -- Origin and Host without keys --------------------------------------------------------------------

HOSTS = ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "127.0.0.2", "0.0.0.0", "evil.example",
         "127.0.0.1.evil.example", "[::ffff:127.0.0.1]", "127.1", "2130706433"]
TEXT = st.text(alphabet=string.printable.strip("\r\n\x0b\x0c"), max_size=30).map(str.strip)


def ports(own: int) -> st.SearchStrategy[str]:
    return st.sampled_from(["", f":{own}", f":{own + 1}", f":{own - 1}", ":0", ":65536", ":x", ":80", ":443",
                            f":0{own}"])


def origins_and_hosts(own: int) -> st.SearchStrategy[dict[str, str]]:
    origin = st.one_of(
        st.tuples(st.sampled_from(["http://", "https://", "HTTP://", "ws://", "", "//"]), st.sampled_from(HOSTS),
                  ports(own), st.sampled_from(["", "/", "/x", "?q", "#f"])).map("".join),
        st.sampled_from(["null", f"http://user@127.0.0.1:{own}", f"http://127.0.0.1:{own}@evil.example"]), TEXT)
    host = st.tuples(st.sampled_from(HOSTS), ports(own)).map("".join)
    return st.fixed_dictionaries({}, optional={"Origin": origin, "Host": host})


def own_origin(url: str, headers: dict[str, str]) -> bool:
    """Whether `headers` carry no Origin, or exactly the origin a browser sends from a page of the
    server as the request addressed it (its Host, naming the port the server listens on): the only
    requests that may act as `local`."""
    host, port = address(url)
    if "Origin" not in headers:
        return True
    name, _, written = headers.get("Host", f"{host}:{port}").rpartition(":")
    return written.isdigit() and int(written) == port and headers["Origin"] == f"http://{name.lower()}:{port}"


def test_without_keys_only_the_servers_own_origin_acts_as_local(tmp_path: Path) -> None:
    ledger = reversi.open(f"sqlite:///{tmp_path}/keyless.db")
    server = ThreadServer(create_app(ledger, compensator_cmd=None, run_jobs=False))
    try:
        @fuzz_settings(ci=120)
        @given(origins_and_hosts(address(server.url)[1]))
        def probe(headers: dict[str, str]) -> None:
            tried("server_trust.keyless_origins")
            answer = status(server.url, "GET", "/v1/halts", headers)
            assert answer in (200, 400, 401), (headers, answer)
            if answer == 200:
                assert own_origin(server.url, headers), headers

        probe()
        host, port = address(server.url)
        for own in ({"Origin": f"http://{host}:{port}"}, {"Origin": f"http://localhost:{port}",
                                                          "Host": f"localhost:{port}"}, {}):
            assert status(server.url, "GET", "/v1/halts", own) == 200, own
    finally:
        server.stop()
        ledger.close()


def test_without_keys_the_gateway_acts_as_local_only_for_its_own_origin(tmp_path: Path) -> None:
    _, _, flags = gateway_flags(tmp_path)
    gateway = GatewayProcess(flags, tmp_path / "gateway.log")
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    mcp = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    try:
        @fuzz_settings(ci=40)
        @given(origins_and_hosts(address(gateway.url)[1]))
        def probe(headers: dict[str, str]) -> None:
            tried("server_trust.gateway_origins")
            answer = status(gateway.url, "POST", "/operator/mcp", mcp | headers, body)
            assert answer < 500, (headers, answer)
            if answer < 300:
                assert own_origin(gateway.url, headers), headers

        probe()
    finally:
        gateway.stop()


# -- bodies cut off ------------------------------------------------------------------------------------

CUT_PATHS = ["/v1/runs", "/v1/runs/run_cut/steps", "/v1/runs/run_cut/steps/0/outcome", "/v1/keys", "/v1/halt",
             "/v1/runs/run_cut/rollback", "/v1/approvals/apr_x/approve", "/login", "/logout", "/halts"]


def test_a_body_cut_off_anywhere_leaves_no_traceback(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/cut.db"
    with reversi.open(db, principal="root") as ledger:
        _, key = create_key(ledger.store, "root", "admin")
        ledger.start_run("run_cut").begin("stripe.create_charge", {"amount": 1})
    server = ServerProcess(db, {}, tmp_path / "server.log")
    authorizations = ["", f"Bearer {key}", "Bearer rvk_aaaaaaaaaaaa_" + "x" * 43, "Basic eA=="]
    body = b'{"reason": "cut", "status": "succeeded", "name": "n", "role": "agent", "confirm": true}'
    try:
        @fuzz_settings(ci=60)
        @given(st.sampled_from(CUT_PATHS), st.sampled_from(authorizations), st.integers(0, len(body) - 1),
               st.integers(1, 10**7), st.sampled_from(["application/json", "application/x-www-form-urlencoded"]))
        def cut(path: str, authorization: str, sent: int, missing: int, kind: str) -> None:
            tried("server_trust.cut_bodies")
            headers = {"Content-Type": kind, "Content-Length": str(sent + missing)}
            headers |= {"Authorization": authorization} if authorization else {}
            send_cut_off(server.url, "POST", path, headers, body[:sent])

        cut()
        assert httpx.get(f"{server.url}/healthz", timeout=WAIT_S).status_code == 200
    finally:
        assert server.signal(signal.SIGTERM) == 0
    said = [line for line in iter(lambda: server.lines.get(timeout=WAIT_S), None)]
    assert not [line for line in said if "Traceback" in line or line.startswith(" ")], "\n".join(said)

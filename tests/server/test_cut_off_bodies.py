"""Bodies are read only after the key is checked, and a client that goes away mid-body costs the log
one line at most: never a traceback, and nothing at all for a request without a valid key."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.server.conftest import WAIT_S, ServerProcess, wait_for
from tests.server.raw_http import send_cut_off, status_before_body

import reversi
from reversi.engine.keys import create_key

# Requests whose body is cut off: the JSON endpoints (in a worker thread, and on the event loop for
# recording), an admin endpoint, and the console's forms (signed in, and the sign-in form itself).
CUT = [("POST", "/v1/runs"), ("POST", "/v1/runs/run_cut/steps"), ("POST", "/v1/keys"), ("POST", "/v1/halt"),
       ("POST", "/login"), ("POST", "/halts")]
SHUTDOWN = re.compile(r"^(INFO: +(Shutting down|Waiting for|Application shutdown|Finished server)"
                      r"|reversi-server: stopped)")


@pytest.fixture
def keyed(db_url: str) -> dict[str, str]:
    """Keys of the store `spawn_server` serves: `admin` and `agent`."""
    with reversi.open(db_url) as ledger:
        return {role: create_key(ledger.store, role, role)[1] for role in ("admin", "agent")}


def answered(server: ServerProcess) -> int:
    """How many requests the server has finished answering (its latency histogram's count)."""
    text = httpx.get(f"{server.url}/metrics", timeout=WAIT_S).text
    return int(sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "reversi_http_request_duration_seconds_count" and s.labels["route"] != "/metrics"))


def test_a_body_cut_off_mid_request_logs_one_line_at_most_and_no_traceback(
    spawn_server: Callable[[dict[str, str]], ServerProcess], keyed: dict[str, str], db_url: str,
) -> None:
    server = spawn_server({})
    with reversi.open(db_url, principal="admin") as ledger:
        ledger.start_run("run_cut")
    who = {"no key": {}, "a wrong key": {"Authorization": "Bearer rvk_aaaaaaaaaaaa_" + "x" * 43},
           "the admin's key": {"Authorization": f"Bearer {keyed['admin']}"}}
    sent = 0
    for headers in who.values():
        for method, path in CUT:
            kind = "application/json" if path.startswith("/v1/") else "application/x-www-form-urlencoded"
            send_cut_off(server.url, method, path, headers | {"Content-Type": kind, "Content-Length": "4096"},
                         b'{"reason": "cut' if path.startswith("/v1/") else b"csrf=x&reason=cut")
            sent += 1
    wait_for(lambda: answered(server) >= sent, f"the server to have answered the {sent} cut-off requests")
    assert server.signal(signal.SIGTERM) == 0
    said = [line for line in iter(lambda: server.lines.get(timeout=WAIT_S), None) if not SHUTDOWN.match(line)]
    assert not [line for line in said if "Traceback" in line or line.startswith("  ")], "\n".join(said)
    assert len(said) <= len(CUT), "more than one line per request with the admin's key:\n" + "\n".join(said)


@pytest.mark.parametrize("length", ["100000", str(10**12)])
def test_a_request_without_a_valid_key_is_refused_before_its_body_is_read(
    spawn_server: Callable[[dict[str, str]], ServerProcess], keyed: dict[str, str], length: str,
) -> None:
    server = spawn_server({})
    wrong = "Bearer rvk_aaaaaaaaaaaa_" + "x" * 43
    for path in ("/v1/runs", "/v1/runs/run_cut/steps", "/v1/keys"):
        for authorization, expected in ((None, 401), (wrong, 401)):
            headers = {"Content-Type": "application/json", "Content-Length": length}
            headers |= {"Authorization": authorization} if authorization else {}
            assert status_before_body(server.url, "POST", path, headers) == expected, (path, authorization)
    agent = {"Content-Type": "application/json", "Content-Length": length, "Authorization": f"Bearer {keyed['agent']}"}
    assert status_before_body(server.url, "POST", "/v1/keys", agent) == 403, "the role is checked before the body too"


def test_the_log_line_of_a_cut_off_request_escapes_what_its_path_carries(
    spawn_server: Callable[[dict[str, str]], ServerProcess], keyed: dict[str, str],
) -> None:
    """The path is the client's: an escape sequence in it (`%1b`, a C1 `%c2%9b`) is logged escaped."""
    server = spawn_server({})
    path = "/v1/runs/run_%1b%5d0%3bpwned%07%c2%9b2J%e2%80%ae/steps"
    send_cut_off(server.url, "POST", path, {"Authorization": f"Bearer {keyed['admin']}",
                                            "Content-Type": "application/json", "Content-Length": "4096"}, b'{"to')
    line = server.search(r"the client went away")
    assert "\\x1b]0;pwned\\x07\\x9b2J\\u202e" in line.string, line.string
    assert not {"\x1b", "\x07", "\x9b", "\u202e"} & set(line.string)

"""Session ids swapped and forged between principals on `reversi-gateway --http`: two agents and two
operators, each with its handshake sessions on `/mcp` and `/operator/mcp`, send requests (calls,
event streams, DELETEs; handshake, stateless and revision-less) naming their own session, another
key's, or a forged or altered id. Only a key's own session answers it; any other id answers exactly
as an unknown one (404), every session still serves its owner afterwards, every call is journaled in
a run of the key that made it, and the gateway prints no traceback. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.gateway.http_wire import GatewayProcess, mcp_request
from tests.gateway.session_wire import CALLS, headers, make_keys, open_session
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.mcp_messages import gateway_flags, journal_problems

import reversi

NAMES = ["alice", "bob", "ops", "ops2"]
AGENTS = {"alice", "bob"}
ENDPOINTS = ["/mcp", "/operator/mcp"]


class SessionGateway:
    """The gateway with keys, and the sessions each key holds on each endpoint (opened when first needed)."""

    def __init__(self, tmp_path: Path, db: str) -> None:
        self.shop, _, flags = gateway_flags(tmp_path)
        self.db = db
        flags[flags.index("--db") + 1] = db
        keys = make_keys(self.db)
        self.keys = dict(zip(NAMES, [*keys.of("/mcp"), *keys.of("/operator/mcp")], strict=True))
        self.log = tmp_path / "gateway.log"
        self.process = GatewayProcess(flags, self.log)
        self.client = httpx.Client(base_url=self.process.url, timeout=60)
        self._sessions: dict[tuple[str, str], str] = {}
        self.unknown = self.client.post("/mcp", headers=headers(self.keys["alice"], "0" * 32), json=CALLS["/mcp"]("x"))
        assert self.unknown.status_code == 404

    def may_use(self, name: str, endpoint: str) -> bool:
        return endpoint == "/mcp" or name not in AGENTS

    def session(self, name: str, endpoint: str) -> str:
        if (name, endpoint) not in self._sessions:
            self._sessions[name, endpoint] = open_session(self.client, endpoint, self.keys[name])
        return self._sessions[name, endpoint]

    def ended(self, name: str, endpoint: str) -> None:
        self._sessions.pop((name, endpoint), None)

    def owner_of(self, session: str) -> tuple[str, str] | None:
        return next((held for held, sid in self._sessions.items() if sid == session), None)

    def open_sessions(self) -> dict[tuple[str, str], str]:
        return dict(self._sessions)

    def send(self, method: str, endpoint: str, head: dict[str, str], body: dict[str, Any] | None) -> int:
        if method == "GET":
            with self.client.stream("GET", endpoint, headers=head) as stream:
                status = stream.status_code  # closed unread: a stream taken is a stream held
        else:
            answer = self.client.request(method, endpoint, headers=head, json=body)
            status = answer.status_code
            if status == 404 and "Mcp-Session-Id" in head:
                assert (answer.status_code, answer.text) == (self.unknown.status_code, self.unknown.text)
        assert status < 500, (method, endpoint, head, status)
        return status

    def close(self) -> None:
        self.client.close()
        self.process.stop()


@pytest.fixture
def sessions_gateway(tmp_path: Path, db_url: str) -> Iterator[SessionGateway]:
    gateway = SessionGateway(tmp_path, db_url)
    try:
        yield gateway
    finally:
        gateway.close()
    assert "Traceback" not in gateway.log.read_text()


def _altered(session: str, how: int) -> str:
    """An id near a real one: another case, cut short, lengthened, one character changed."""
    return [session.upper(), session[:-1], session + "0", session[:-1] + ("0" if session[-1] != "0" else "1")][how]


@st.composite
def attempts(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "actor": draw(st.sampled_from(NAMES)),
        "endpoint": draw(st.sampled_from(ENDPOINTS)),
        "target": draw(st.sampled_from(["own", "other", "other", "forged", "altered", "none"])),
        "victim": (draw(st.sampled_from(NAMES)), draw(st.sampled_from(ENDPOINTS))),
        "how": draw(st.integers(0, 3)),
        "forged": draw(st.text(alphabet="0123456789abcdef", min_size=1, max_size=40)),
        "method": draw(st.sampled_from(["POST", "POST", "GET", "DELETE"])),
        "revision": draw(st.sampled_from(["handshake", "handshake", "stateless", "absent"])),
    }


def _session_named(gateway: SessionGateway, attempt: dict[str, Any]) -> str | None:
    actor, endpoint = attempt["actor"], attempt["endpoint"]
    victim = attempt["victim"] if gateway.may_use(*attempt["victim"]) else ("alice", "/mcp")
    if victim[0] == actor:
        victim = ("bob" if actor != "bob" else "alice", "/mcp")
    match attempt["target"]:
        case "own":  # an agent's own on the operators' endpoint: its /mcp one (refused anyway)
            return gateway.session(actor, endpoint if gateway.may_use(actor, endpoint) else "/mcp")
        case "other":
            return gateway.session(*victim)
        case "altered":
            return _altered(gateway.session(*victim), attempt["how"])
        case "forged":
            return str(attempt["forged"])
    return None


def _request(attempt: dict[str, Any], key: str, session: str | None) -> tuple[dict[str, str], dict[str, Any] | None]:
    call = CALLS[attempt["endpoint"]](attempt["actor"])
    if attempt["revision"] == "stateless":
        head, body = mcp_request("tools/call", call["params"])
        head = {**head, "Authorization": f"Bearer {key}"}
        return ({**head, "Mcp-Session-Id": session} if session else head), body
    head = headers(key, session)
    if attempt["revision"] == "absent":
        del head["MCP-Protocol-Version"]
    return head, (call if attempt["method"] == "POST" else None)


def _check_outcome(gateway: SessionGateway, attempt: dict[str, Any], session: str | None, status: int) -> None:
    actor, endpoint, method = attempt["actor"], attempt["endpoint"], attempt["method"]
    if not gateway.may_use(actor, endpoint):
        assert status == 403
        return
    if attempt["revision"] == "stateless" or session is None:
        return  # no session named (or none that counts): answered as any stateless or opening request
    mine = gateway.owner_of(session) == (actor, endpoint)
    if not mine:
        assert status == 404, (attempt, status)  # another's session, or none: as if it did not exist
    elif method == "DELETE":
        assert status == 200
        gateway.ended(actor, endpoint)
    else:
        assert status in ((200, 409) if method == "GET" else (200,)), (attempt, status)


def _journal_is_by_its_callers(db: str) -> list[str]:
    """Each echo (its text names the key that sent it) journaled in a run of that key."""
    with reversi.open(db) as ledger:
        return [f"{s.args} in a run of {r.run.principal}" for r in ledger.list_runs()
                for s in ledger.get_run(r.run.run_id).steps() if s.args.get("text") != r.run.principal]


@fuzz_settings(ci=60)
@given(attempt=attempts())
def test_a_session_id_answers_only_the_key_that_opened_it(
    sessions_gateway: SessionGateway, attempt: dict[str, Any]
) -> None:
    gateway = sessions_gateway
    before = gateway.open_sessions()
    session = _session_named(gateway, attempt)
    head, body = _request(attempt, gateway.keys[attempt["actor"]], session)
    status = gateway.send(attempt["method"], attempt["endpoint"], head, body)
    tried("gateway-sessions")
    _check_outcome(gateway, attempt, session, status)
    for (name, endpoint), sid in gateway.open_sessions().items():  # every session still serves its owner
        if before.get((name, endpoint)) == sid:
            answer = gateway.client.post(endpoint, headers=headers(gateway.keys[name], sid), json=CALLS[endpoint](name))
            assert answer.status_code == 200, (name, endpoint, attempt, answer.text)
    assert _journal_is_by_its_callers(gateway.db) == []
    assert journal_problems(gateway.shop, gateway.db) == []

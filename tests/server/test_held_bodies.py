"""A key revoked while its request's body is still on its way: the request does nothing. The key is
read again once the body is in (a client may send the headers, then hold the last byte for minutes)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from tests.server.conftest import WAIT_S, Site

from reversi.engine.keys import list_keys, revoke_key


def held_request(url: str, path: str, key: str, body: dict[str, object],
                 headers: dict[str, str] | None = None) -> tuple[socket.socket, bytes]:
    """Send a POST's headers with `Expect: 100-continue`, and wait for the server's `100 Continue`: it
    comes once the app asks for the body, that is once the key was checked. The socket and the body."""
    parts = urlsplit(url)
    raw = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=WAIT_S)
    more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {key}\r\n{more}"
            f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\nExpect: 100-continue\r\n\r\n")
    sock.sendall(head.encode())
    said = _answer_line(sock)
    assert said.startswith(b"HTTP/1.1 100"), said  # the key passed: the body is awaited
    _answer_line(sock)  # the blank line that ends the interim answer
    return sock, raw


def _answer_line(sock: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        line += chunk
    return line


def finish(sock: socket.socket, body: bytes) -> int:
    """Send the body held back; the answer's status."""
    sock.sendall(body)
    status = _answer_line(sock)
    sock.close()
    return int(status.split(b" ", 2)[1])


def test_an_admin_key_revoked_while_its_body_is_held_mints_no_key(make_site: Callable[..., Site]) -> None:
    site = make_site()
    site.add_key("admin", "admin")
    stolen = site.add_key("stolen", "admin", name="mallory")
    before = len(list_keys(site.ledger.store))
    sock, last = held_request(site.url, "/v1/keys", stolen, {"name": "persist", "role": "admin"})
    mallory = next(row for row in list_keys(site.ledger.store) if row.name == "mallory")
    revoke_key(site.ledger.store, mallory.key_id, by="admin")

    assert finish(sock, last) == 401
    assert len(list_keys(site.ledger.store)) == before


def test_an_agent_key_revoked_while_its_body_is_held_opens_no_run(make_site: Callable[..., Site]) -> None:
    site = make_site()
    stolen = site.add_key("stolen", "agent", name="mallory")
    sock, last = held_request(site.url, "/v1/runs", stolen, {})
    mallory = next(row for row in list_keys(site.ledger.store) if row.name == "mallory")
    revoke_key(site.ledger.store, mallory.key_id, by="admin")

    assert finish(sock, last) == 401
    assert site.ledger.list_runs() == []


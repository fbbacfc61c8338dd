"""A key revoked while its request's body is still on its way: the request does nothing. The key is
read again once the body is in (a client may send the headers, then hold the last byte for minutes)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from tests.server.conftest import WAIT_S, Site

from reversi.engine.keys import list_keys, revoke_key


def held_request(url: str, path: str, key: str, body: dict[str, object],
                 headers: dict[str, str] | None = None) -> tuple[socket.socket, bytes]:
    """Send a POST's headers and all but the last byte of its body; the socket and the byte kept back."""
    parts = urlsplit(url)
    raw = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=WAIT_S)
    more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {key}\r\n{more}"
            f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n")
    sock.sendall(head.encode() + raw[:-1])
    return sock, raw[-1:]


def finish(sock: socket.socket, last: bytes) -> int:
    """Send the byte kept back; the answer's status."""
    sock.sendall(last)
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    sock.close()
    return int(answer.split(b" ", 2)[1])


def test_an_admin_key_revoked_while_its_body_is_held_mints_no_key(make_site: Callable[..., Site]) -> None:
    site = make_site()
    site.add_key("admin", "admin")
    stolen = site.add_key("stolen", "admin", name="mallory")
    before = len(list_keys(site.ledger.store))
    sock, last = held_request(site.url, "/v1/keys", stolen, {"name": "persist", "role": "admin"})
    time.sleep(0.3)  # (the headers read and the key checked first: without it the test proves less, never fails)
    mallory = next(row for row in list_keys(site.ledger.store) if row.name == "mallory")
    revoke_key(site.ledger.store, mallory.key_id, by="admin")

    assert finish(sock, last) == 401
    assert len(list_keys(site.ledger.store)) == before


def test_an_agent_key_revoked_while_its_body_is_held_opens_no_run(make_site: Callable[..., Site]) -> None:
    site = make_site()
    stolen = site.add_key("stolen", "agent", name="mallory")
    sock, last = held_request(site.url, "/v1/runs", stolen, {})
    time.sleep(0.3)
    mallory = next(row for row in list_keys(site.ledger.store) if row.name == "mallory")
    revoke_key(site.ledger.store, mallory.key_id, by="admin")

    assert finish(sock, last) == 401
    assert site.ledger.list_runs() == []


"""HTTP/1.1 over a raw socket, for what a client library will not send: a body cut off mid-request,
a `Content-Length` never followed by its body, any `Origin` or `Host`."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

WAIT_S = 30.0


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def head(method: str, path: str, url: str, headers: dict[str, str]) -> bytes:
    """A request's head; `Host` is the server's address unless `headers` names one."""
    host, port = address(url)
    lines = [f"{method} {path} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in ({"Host": f"{host}:{port}"} | headers).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def send_cut_off(url: str, method: str, path: str, headers: dict[str, str], sent: bytes) -> None:
    """Send a head that promises more body than `sent`, then close the connection."""
    with socket.create_connection(address(url), timeout=WAIT_S) as sock:
        sock.sendall(head(method, path, url, headers) + sent)


def status_before_body(url: str, method: str, path: str, headers: dict[str, str]) -> int:
    """The status the server answers to a head alone (its `Content-Length` body never sent)."""
    with socket.create_connection(address(url), timeout=WAIT_S) as sock:
        sock.sendall(head(method, path, url, headers))
        return _status_line(sock)


def status(url: str, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> int:
    """The status of a whole request (its `Content-Length` set from `body`)."""
    sized = headers | ({"Content-Length": str(len(body))} if body or method == "POST" else {})
    with socket.create_connection(address(url), timeout=WAIT_S) as sock:
        sock.sendall(head(method, path, url, sized) + body)
        return _status_line(sock)


def _status_line(sock: socket.socket) -> int:
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError(f"the server closed the connection without answering: {answer!r}")
        answer += chunk
    return int(answer.split(b" ", 2)[1])

"""The listening socket of the HTTP surfaces (`reversi-server`, `reversi-gateway --http`), bound before
they start, so an address in use is one line of error and not a web server's traceback."""

from __future__ import annotations

import os
import socket

from reversi.errors import ConfigError


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (port 0: any free one), listening.

    Raises:
        ConfigError: the address cannot be bound (in use, not this machine's).
    """
    try:
        return socket.create_server((host.strip("[]"), port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)  # its strerror repeats the address
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}") from None

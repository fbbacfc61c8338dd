"""The security tests share the server tests' fixture that starts `reversi-server` subprocesses."""

from tests.server.conftest import spawn_server

__all__ = ["spawn_server"]

"""`reversi-server`: the HTTP API over the ledger. `create_app(ledger)` is the ASGI application."""

from reversi.server.app import create_app

__all__ = ["create_app"]

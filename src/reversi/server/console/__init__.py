"""The web console: server-rendered pages over the same engine as the API, at `/`."""

from __future__ import annotations

from starlette.routing import BaseRoute

from reversi.server.console.pages import Console
from reversi.server.console.session import Sessions
from reversi.server.endpoint import ServerState


def console_for(state: ServerState, session_secret: str | None = None) -> Console:
    """The console of an app serving `state`: its `routes()` and its HTML `error_page`."""
    return Console(state, Sessions(state.ledger, session_secret))


def console_routes(state: ServerState, session_secret: str | None = None) -> list[BaseRoute]:
    """The console's routes (pages, forms, static files) for an app serving `state`."""
    return console_for(state, session_secret).routes()


__all__ = ["Console", "console_for", "console_routes"]

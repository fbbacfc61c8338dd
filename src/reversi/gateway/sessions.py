"""MCP sessions over HTTP: each belongs to the key that opened it, ends when left idle, and takes
the gateway's state for it along; and request bodies, read whole once the key is checked.

The SDK's session manager already refuses a session to anyone but its opener, as if it did not exist
(404), when the request's `scope["user"]` names who is asking: the guard sets it to the key's
`owner`. A key opens its own sessions; in the no-keys mode every request is `local`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive

from reversi.engine.keys import Principal

log = logging.getLogger("reversi.gateway")

MAX_BODY = 1024 * 1024


def owner(principal: Principal) -> AuthenticatedUser:
    """Who the SDK records as a session's owner, and compares each later request with: the key
    (its principal's name and the key's id, so a session outlives neither a rename nor a new key)."""
    return AuthenticatedUser(
        AccessToken(token="", client_id=principal.name, scopes=[principal.role.value], subject=principal.key_id)
    )


class Sessions(StreamableHTTPSessionManager):
    """The SDK's session manager for one endpoint, which says when a session ends (a DELETE, the idle
    timeout, a crash, an opening request that failed) so the gateway's state for it goes too."""

    def __init__(
        self,
        app: Any,
        *,
        idle_timeout: float,
        security: TransportSecuritySettings | None,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            app=app,
            json_response=True,
            security_settings=security,
            max_request_body_size=MAX_BODY,
            session_idle_timeout=idle_timeout,
        )
        self._on_end = on_end

    def is_open(self, session_id: str) -> bool:
        """Whether `session_id` names a session this manager serves."""
        return session_id in self._server_instances

    def open_ids(self) -> set[str]:
        return set(self._server_instances)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        # The SDK's one place where a session ends. Told before it awaits anything, so a request of
        # the session that is still being served cannot bind it again afterwards (see RunBinder).
        if self._on_end is not None and self.is_open(session_id):
            self._on_end(session_id)
        await super()._discard_session(session_id, transport)


async def whole_body(receive: Receive) -> Receive | None:
    """Read the request's body (up to just past MAX_BODY, where the SDK's limit answers 413) and
    return a `receive` that gives it again; None when the client went away before sending it all,
    which needs no answer and says nothing worth a line on stderr."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more and size <= MAX_BODY:
        message = await receive()
        if message["type"] != "http.request":
            log.debug("the client went away before sending the whole request body")
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body", False))
    pending: deque[Message] = deque([{"type": "http.request", "body": b"".join(chunks), "more_body": more}])

    async def replay() -> Message:
        return pending.popleft() if pending else await receive()

    return replay

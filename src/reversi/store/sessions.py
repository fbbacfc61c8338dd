"""The queries of console sign-outs (`console_signouts`): `SessionQueries`, part of every transaction's
`Queries`; their SQL is in `sessions.sql`."""

from __future__ import annotations

from reversi.store.sql import load
from reversi.store.statements import Statements

_SQL = load("sessions.sql")


class SessionQueries(Statements):
    """The queries of console sign-outs (`console_signouts`)."""

    def is_signed_out(self, session_hash: str) -> bool:
        found = self._exec(_SQL["is_signed_out"], (session_hash,)).fetchone()
        return found is not None

    def sign_out(self, session_hash: str, until: str, now: str) -> None:
        """Remember a signed-out session until `until`; forget those whose cookies have expired by `now`."""
        self._exec(_SQL["forget_signouts"], (now,))
        self._exec(_SQL["sign_out"], (session_hash, until))

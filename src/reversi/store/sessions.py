"""The SQL of console sign-outs (`console_signouts`): `SessionQueries`, part of every transaction's `Queries`."""

from __future__ import annotations

from reversi.store.statements import Statements


class SessionQueries(Statements):
    """The SQL of console sign-outs (`console_signouts`)."""

    def is_signed_out(self, session_hash: str) -> bool:
        found = self._exec("SELECT 1 FROM console_signouts WHERE session_hash = ?", (session_hash,)).fetchone()
        return found is not None

    def sign_out(self, session_hash: str, until: str, now: str) -> None:
        """Remember a signed-out session until `until`; forget those whose cookies have expired by `now`."""
        self._exec("DELETE FROM console_signouts WHERE until < ?", (now,))
        self._exec("INSERT INTO console_signouts (session_hash, until) VALUES (?, ?) "
                   "ON CONFLICT (session_hash) DO UPDATE SET until = excluded.until", (session_hash, until))

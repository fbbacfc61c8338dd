"""The SQL of console sign-outs (`console_signouts`), run inside a transaction's `Queries`."""

from __future__ import annotations

from reversi.store.queries import Queries


def is_signed_out(q: Queries, session_hash: str) -> bool:
    return q.execute("SELECT 1 FROM console_signouts WHERE session_hash = ?", (session_hash,)).fetchone() is not None


def sign_out(q: Queries, session_hash: str, until: str, now: str) -> None:
    """Remember a signed-out session until `until`; forget those whose cookies have expired by `now`."""
    q.execute("DELETE FROM console_signouts WHERE until < ?", (now,))
    q.execute("INSERT INTO console_signouts (session_hash, until) VALUES (?, ?) "
              "ON CONFLICT (session_hash) DO UPDATE SET until = excluded.until", (session_hash, until))

"""The choice of back end by URL: `open_store`, and the URL forms it knows.

Kept apart from `base.py`, which every back end imports: the interface knows no back end.
"""

from __future__ import annotations

from reversi.errors import BadInput
from reversi.store.base import Store

DEFAULT_URL = "sqlite:///.reversi/reversi.db"
STORE_URL_FORMS = "sqlite:///PATH or postgresql://..."


def is_store_url(url: str) -> bool:
    """Whether `url` names a back end this package has (it may still be unreachable)."""
    return url.startswith(("sqlite:///", "postgresql://", "postgres://"))


def open_store(url: str | None = None) -> Store:
    """Open (creating and migrating as needed) the store named by `url`.

    Raises:
        BadInput: the URL names no supported back end.
        StoreUnavailable: the store cannot be reached.
    """
    url = url or DEFAULT_URL
    # Each back end is imported only when used: a SQLite user never loads psycopg.
    if url.startswith("sqlite:///"):
        from reversi.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    if url.startswith(("postgresql://", "postgres://")):
        from reversi.store.postgres import PostgresStore

        return PostgresStore(url)
    raise BadInput(f"unsupported store URL {url!r}: use {STORE_URL_FORMS}")

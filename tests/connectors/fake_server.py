"""The fakes of `reversi.demo.fakes`, served for one test with the connector's settings pointed at them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from reversi.demo.fakes.base import FakeBase, bearer, serving

__all__ = ["URL", "FakeBase", "bearer", "served_with", "serving"]

URL = "the fake's URL"


@contextmanager
def served_with(fake: Any, monkeypatch: Any, **settings: str) -> Iterator[Any]:
    """Serve `fake` and point the connector's settings at it (a value of `URL` becomes its address)."""
    with serving(fake.app(), fake) as url:
        for name, value in settings.items():
            monkeypatch.setenv(name, url if value == URL else value)
        yield fake

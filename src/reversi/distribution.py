"""The installed distribution: its name on the package index and its version. The import name is
`reversi`; the distribution is `reversi-undo`, since `reversi` on the public index is another project."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed

__all__ = ["NAME", "version"]

NAME = "reversi-undo"


@cache
def version() -> str:
    """The installed version; "" when the source tree runs without being installed."""
    try:
        return _installed(NAME)
    except PackageNotFoundError:
        return ""

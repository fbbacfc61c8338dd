"""What an upstream's name may be: the gateway names that upstream's tools `NAME.TOOL` with it, and
`reversi manifest show --prefix NAME` writes a manifest for those names."""

from __future__ import annotations

import re

__all__ = ["UPSTREAM_NAME_RULE", "is_upstream_name"]

_UPSTREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
UPSTREAM_NAME_RULE = "1-64 of letters, digits, _ and -"


def is_upstream_name(name: str) -> bool:
    return _UPSTREAM_NAME.fullmatch(name) is not None

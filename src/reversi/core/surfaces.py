"""The kinds of surface a principal acts through, and the defaults each gives what a call leaves out.

One table, applied by the principal-bound ledger (`PrincipalLedger`); a surface that shows a default
(a flag's help, an API schema, a page's text) reads it from here too.
"""

from __future__ import annotations

from enum import Enum

from reversi.core.backoff import Retry


class Surface(Enum):
    """Who is between a principal and the ledger."""

    SDK = "sdk"
    API = "api"
    CLI = "cli"
    CONSOLE = "console"
    GATEWAY = "gateway"

    @property
    def is_local(self) -> bool:
        """Whether whoever runs the process acts through it (the SDK, the CLI): REVERSI_ACTOR names them."""
        return self in (Surface.SDK, Surface.CLI)

    @property
    def attempts(self) -> int:
        """Attempts per compensation of a rollback that does not say how many."""
        return _ATTEMPTS[self]


# The API and the CLI try once unless asked for more (SPEC: `retries`, default 1); the console's button
# and the gateway's operator tools take no count, and try three times.
_ATTEMPTS = {Surface.SDK: Retry().attempts, Surface.API: 1, Surface.CLI: 1, Surface.CONSOLE: 3, Surface.GATEWAY: 3}

"""`reversi demo`: a self-contained tour of the gateway, the connectors, halts, resolve and rollback.

`run_demo(workdir, echo)` is what the CLI's `demo` command calls. `reversi.demo.fakes` holds the small
fakes of Stripe, Slack and a mail API it runs against (the connector tests use them too).
"""

from reversi.demo.scenario import run_demo

__all__ = ["run_demo"]

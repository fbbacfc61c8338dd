"""`reversi demo`: an agent's run through the gateway on real files and rows, settled and rolled back, here."""

from __future__ import annotations

from pathlib import Path

import click

from reversi.cli.context import echo, state


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> int:
    """Run an agent through the gateway here (demo-shop/, .reversi/), halt it, resolve it and roll it back."""
    from reversi.demo import run_demo
    from reversi.errors import ConfigError

    if state(ctx).db is not None:
        raise ConfigError("the demo keeps its journal in ./.reversi/reversi.db, beside its shop (./demo-shop/): "
                          "run it without --db")
    return run_demo(Path.cwd(), echo)

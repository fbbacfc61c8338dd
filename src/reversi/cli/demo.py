"""`reversi demo`: an agent's run journaled, planned, settled and rolled back, in this folder."""

from __future__ import annotations

from pathlib import Path

import click

from reversi.cli.context import state


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> int:
    """Record a realistic agent run here (.reversi/), plan it, resolve it and roll it back."""
    from reversi.demo import run_demo
    from reversi.errors import ConfigError

    if state(ctx).db is not None:
        raise ConfigError("the demo keeps its journal in ./.reversi/reversi.db, beside its stand-in world: "
                          "run it without --db")
    return run_demo(Path.cwd(), click.echo)

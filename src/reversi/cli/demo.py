"""`reversi demo`: an agent's run journaled, planned, settled and rolled back, in this folder."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
def demo() -> int:
    """Record a realistic agent run here (.reversi/), plan it, resolve it and roll it back."""
    from reversi.demo import run_demo

    return run_demo(Path.cwd(), click.echo)

"""`reversi completion SHELL`: the shell's completion script, to source from its start-up file."""

from __future__ import annotations

import click

from reversi.cli.context import echo

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", metavar="SHELL", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> int:
    """Print the completion script for SHELL, e.g. `eval "$(reversi completion bash)"` in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    root = ctx.find_root()
    script_class = get_completion_class(shell)
    assert script_class is not None  # every name in SHELLS is one click ships
    echo(script_class(root.command, {}, root.info_name or "reversi", "_REVERSI_COMPLETE").source())
    return 0

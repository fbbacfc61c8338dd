"""`reversi hook`: the command Claude Code runs as a hook (`reversi.integrations.claude_code`)."""

from __future__ import annotations

import json
import sys

import click

from reversi.cli.context import echo, manifest_option, state

_MAX_EVENT = 16 * 1024 * 1024  # a tool's input and response ride in the event: generous, not unbounded


@click.command()
@manifest_option
@click.option("--files", is_flag=True,
              help="Keep what Write, Edit and Bash calls change under the fs root (REVERSI_FS_ROOT, else the"
                   " working directory), so that a rollback undoes it with fs.restore_changes.")
@click.pass_context
def hook(ctx: click.Context, manifests: tuple[str, ...], files: bool) -> None:
    """Journal the Claude Code hook event on stdin (PreToolUse, PostToolUse, PostToolUseFailure) in the
    session's run; a refused call is denied with the reason. Set it as the command of those hooks."""
    from reversi.core.json_values import parse_json
    from reversi.errors import BadInput, ReversiError
    from reversi.integrations.claude_code import answer_hook, unjournaled

    try:
        text = sys.stdin.read(_MAX_EVENT + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"could not read the hook event on stdin: {exc}") from None
    if len(text) > _MAX_EVENT:
        raise BadInput(f"the hook event on stdin is over {_MAX_EVENT} characters")
    event = parse_json(text, "the hook event on stdin")
    if not isinstance(event, dict):
        raise BadInput("the hook event on stdin must be a JSON object")
    try:
        with state(ctx).ledger(manifests) as ledger:
            answer = answer_hook(ledger, event, files=files)
    except ReversiError as exc:  # the store cannot be reached (a bad manifest is said the same way)
        answer = unjournaled(event, exc)
    except Exception as exc:  # anything else: a call about to run is blocked all the same (fail closed)
        answer = unjournaled(event, ReversiError(f"{type(exc).__name__}: {exc}"[:300]))
    if answer.output is not None:
        echo(json.dumps(answer.output, ensure_ascii=True))  # one line of ASCII JSON, as Claude Code reads it
    if answer.error:
        echo(answer.error, err=True)
    ctx.exit(answer.exit_code)

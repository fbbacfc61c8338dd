"""`reversi follow-ups`: what people still have to do about the steps rollbacks left in the world."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, state
from reversi.core import redaction


@click.group("follow-ups")
def follow_ups() -> None:
    """The follow-ups rollbacks opened for steps they could not undo."""


@follow_ups.command("list")
@click.argument("run_id", metavar="RUN")
@click.option("--open", "only_open", is_flag=True, help="Only those still open.")
@json_option
@click.pass_context
def list_follow_ups(ctx: click.Context, run_id: str, only_open: bool, as_json: bool) -> int:
    """The follow-ups of RUN, in the order they were opened."""
    from reversi.core.models import check_run_id

    check_run_id(run_id)
    with state(ctx).door(()) as door:
        found = [f for f in door.follow_ups(run_id, masked=True) if not only_open or f.status == "open"]
    if as_json:
        echo_json([f.to_dict() for f in found])
    elif not found:
        echo("no follow-ups" if not only_open else "no open follow-ups")
    for f in found if not as_json else ():
        echo(f.describe())
    return 0


@follow_ups.command("close")
@click.argument("run_id", metavar="RUN")
@click.argument("step", type=int)
@click.option("--note", help="What was done (required; kept in the journal).")
@click.option("--actor", help="Who did it (default: REVERSI_ACTOR, else the principal).")
@json_option
@click.pass_context
def close(ctx: click.Context, run_id: str, step: int, note: str | None, actor: str | None, as_json: bool) -> int:
    """Close the follow-up of STEP of RUN, saying what was done."""
    from reversi.core.models import check_run_id
    from reversi.errors import BadInput

    check_run_id(run_id)
    if not note or not note.strip():
        raise BadInput("a note is required (--note): say what was done")
    with state(ctx).door(()) as door:
        closed = door.close_follow_up(run_id, step, note, actor=actor)
        closed = redaction.follow_up(redaction.learn(door.masker(), door.get_run(run_id).steps()), closed)
    if as_json:
        echo_json(closed.to_dict())
    else:
        echo(f"closed {closed.follow_up_id} (step {closed.step} of {run_id})")
    return 0

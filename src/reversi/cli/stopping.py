"""`reversi halt` and `reversi kill-switch`: stop new calls (rollbacks keep working)."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, state
from reversi.core.json_values import compact
from reversi.core.models import Halt, who_acted


@click.group()
def halt() -> None:
    """Halts in the store: stop matching new calls in every process at once."""


@halt.command("add")
@click.argument("reason")
@click.option("--tool", help="Tool glob, e.g. 'stripe.*'.")
@click.option("--actor", help="Actor glob (the run's actor, not who adds the halt).")
@click.option("--tenant", help="Tenant glob.")
@click.option("--environment", help="Environment glob.")
@click.option("--by", help="Who adds the halt (default: REVERSI_ACTOR, else the principal).")
@json_option
@click.pass_context
def halt_add(ctx: click.Context, reason: str, tool: str | None, actor: str | None, tenant: str | None,
             environment: str | None, by: str | None, as_json: bool) -> int:
    """Stop new calls that match every scope given (no scope: every call)."""
    with state(ctx).door() as door:
        added = door.add_halt(reason, tool=tool, actor=actor, tenant=tenant, environment=environment, by=by)
    if as_json:
        echo_json(added.to_dict())
    else:
        echo(_line(added))
    return 0


@halt.command("list")
@json_option
@click.pass_context
def halt_list(ctx: click.Context, as_json: bool) -> int:
    """List the halts in force."""
    with state(ctx).door() as door:
        found = door.halts()
    if as_json:
        echo_json([h.to_dict() for h in found])
    elif not found:
        echo("no halts")
    for h in [] if as_json else found:
        echo(_line(h))
    return 0


def _line(h: Halt) -> str:
    return f"{h.halt_id}  {h.reason}  scope={compact(h.scope.to_dict())}  by {who_acted(h.by, h.principal)}"


@halt.command("lift")
@click.argument("halt_id", required=False, metavar="[HALT_ID]")
@click.option("--by", help="Who lifts it.")
@json_option
@click.pass_context
def halt_lift(ctx: click.Context, halt_id: str | None, by: str | None, as_json: bool) -> int:
    """Lift one halt, or all of them."""
    with state(ctx).door() as door:
        lifted = door.lift_halts(halt_id, by=by)
    if as_json:
        echo_json({"lifted": lifted})
    else:
        echo(f"lifted {lifted}")
    return 0


@click.group("kill-switch")
def kill_switch() -> None:
    """The kill file (REVERSI_KILL_FILE or kill_switch_file:): while it exists, every new call is refused."""


@kill_switch.command("on")
@click.argument("reason", required=False, default="")
@json_option
@click.pass_context
def kill_on(ctx: click.Context, reason: str, as_json: bool) -> int:
    """Create the kill file with REASON in it."""
    from reversi.engine.halts import kill_switch_on

    path = kill_switch_on(state(ctx).settings().kill_switch_file, reason)
    if as_json:
        echo_json({"state": "on", "reason": reason.strip(), "file": str(path)})
    else:
        echo(f"kill switch on: {reason.strip() or 'kill file present'} ({path})")
    return 0


@kill_switch.command("off")
@json_option
@click.pass_context
def kill_off(ctx: click.Context, as_json: bool) -> int:
    """Remove the kill file."""
    from reversi.engine.halts import kill_switch_off

    was_on = kill_switch_off(state(ctx).settings().kill_switch_file)
    if as_json:
        echo_json({"state": "off", "was_on": was_on})
    else:
        echo("kill switch off" if was_on else "kill switch was already off")
    return 0


@kill_switch.command("status")
@json_option
@click.pass_context
def kill_status(ctx: click.Context, as_json: bool) -> int:
    """Say whether the kill file exists, and its reason."""
    from reversi.engine.halts import kill_switch_status

    path, reason = kill_switch_status(state(ctx).settings().kill_switch_file)
    if as_json:
        echo_json({"state": "off" if reason is None else "on", "reason": reason, "file": str(path)})
    elif reason is None:
        echo(f"kill switch off ({path})")
    else:
        echo(f"kill switch on: {reason or 'kill file present'} ({path})")
    return 0

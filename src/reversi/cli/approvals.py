"""`reversi approvals`: decisions a person must make before a call or an undo goes ahead."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from reversi.cli.context import echo, echo_json, json_option, state
from reversi.core.json_values import compact
from reversi.core.models import who_acted

if TYPE_CHECKING:
    from reversi.core.models import Approval


def _line(a: Approval) -> str:
    where = f"step {a.step}" if a.step is not None else "call"
    decided = f"  by {who_acted(a.decided_by, a.decided_principal)}" if a.decided_by else ""
    note = f"  note: {a.note}" if a.note else ""
    return f"{a.approval_id}  {a.status.value:<8} {a.kind.value:<12} {a.run_id} {where}  {a.tool} {compact(a.args)}" \
        f"{decided}{note}"


@click.group()
def approvals() -> None:
    """List, approve and deny approvals."""


@approvals.command("list")
@click.option("--status", type=click.Choice(["pending", "approved", "denied"]), help="Only this status.")
@click.option("--run", "run_id", metavar="RUN", help="Only this run.")
@json_option
@click.pass_context
def approvals_list(ctx: click.Context, status: str | None, run_id: str | None, as_json: bool) -> int:
    """List approvals, pending first."""
    with state(ctx).door() as door:
        found = door.approvals(status, run_id)
    if as_json:
        echo_json([a.to_dict() for a in found])
    elif not found:
        echo("no approvals")
    for a in [] if as_json else found:
        echo(_line(a))
    return 0


@approvals.command("approve")
@click.argument("approval_id", metavar="ID")
@click.option("--by", help="Who approves (default: REVERSI_ACTOR, else the principal).")
@click.option("--note", help="Why.")
@json_option
@click.pass_context
def approve(ctx: click.Context, approval_id: str, by: str | None, note: str | None, as_json: bool) -> int:
    """Approve a pending (or earlier denied) request."""
    with state(ctx).door() as door:
        decided = door.approve(approval_id, by=by, note=note)
    echo_json(decided.to_dict()) if as_json else echo(f"approved {decided.approval_id}")
    return 0


@approvals.command("deny")
@click.argument("approval_id", metavar="ID")
@click.option("--by", help="Who denies (default: REVERSI_ACTOR, else the principal).")
@click.option("--note", required=True, help="Why (required).")
@json_option
@click.pass_context
def deny(ctx: click.Context, approval_id: str, by: str | None, note: str, as_json: bool) -> int:
    """Deny a request; the call (or undo) stays refused until someone approves it."""
    with state(ctx).door() as door:
        decided = door.deny(approval_id, note=note, by=by)
    echo_json(decided.to_dict()) if as_json else echo(f"denied {decided.approval_id}: {decided.note}")
    return 0

"""`reversi keys`: API keys for the HTTP server and the gateway."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, state
from reversi.errors import Conflict


@click.group()
def keys() -> None:
    """Create, list and revoke API keys."""


@keys.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "agent", "operator", "admin"]), required=True,
              help="What the key may do (viewer: read only).")
@click.option("--tenant", help="Confine the key to one tenant.")
@json_option
@click.pass_context
def create(ctx: click.Context, name: str, role: str, tenant: str | None, as_json: bool) -> int:
    """Create a key for principal NAME; the key is printed this once only."""
    with state(ctx).door() as door:
        row, key = door.create_key(name, role, tenant)
    if as_json:
        echo_json({"id": row.key_id, "name": row.name, "role": row.role, "tenant": row.tenant, "key": key})
    else:
        confined = f", tenant {row.tenant}" if row.tenant else ""
        echo(f"created key {row.key_id} for {row.name} ({row.role}{confined})")
        echo(key)
        echo("store it now: it is not shown again", err=True)
    return 0


@keys.command("list")
@json_option
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> int:
    """List keys (never their secrets)."""
    with state(ctx).door() as door:
        rows = door.list_keys()
    if as_json:
        echo_json([r.to_dict() for r in rows])
    elif not rows:
        echo("no keys: reversi-server serves loopback only, as the admin 'local', until one is created")
    for r in [] if as_json else rows:
        state_text = f"revoked {r.revoked_at}" if r.revoked_at else "active"
        echo(f"{r.key_id}  {r.name:<20} {r.role:<8} {r.tenant or '-':<12} {state_text}")
    return 0


@keys.command("revoke")
@click.argument("key_id", metavar="ID")
@click.option("--force", is_flag=True,
              help="Revoke it even if it is the last admin key (nobody is then an admin over HTTP until you "
                   "create another key here).")
@json_option
@click.pass_context
def revoke(ctx: click.Context, key_id: str, force: bool, as_json: bool) -> int:
    """Revoke a key at once."""
    with state(ctx).door() as door:
        try:
            row = door.revoke_key(key_id, last_admin=force)
        except Conflict as exc:
            raise Conflict(f"{exc.message}, or pass --force") from None
    echo_json(row.to_dict()) if as_json else echo(f"revoked {row.key_id} ({row.name})")
    return 0


@keys.command("rotate-data")
@click.option("--batch-size", type=click.IntRange(min=1), default=200, show_default=True,
              help="Data keys moved per transaction.")
@json_option
@click.pass_context
def rotate_data(ctx: click.Context, batch_size: int, as_json: bool) -> int:
    """Re-wrap every data key with the first key of REVERSI_ENCRYPTION_KEYS; safe to stop and run again."""
    with state(ctx).door() as door:
        done = door.rotate_data(batch=batch_size)
    if as_json:
        echo_json(done.to_dict())
        return 0 if not done.stuck else 2
    echo(f"moved {done.moved} data keys onto key {done.current}")
    for kek, count in sorted(done.stuck.items()):
        echo(f"{count} data keys are under key {kek}, which REVERSI_ENCRYPTION_KEYS does not hold: list it "
             "(after the current key) and run this again")
    return 0 if not done.stuck else 2

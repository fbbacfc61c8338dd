"""`reversi erase`: make a tenant's, an actor's or one run's values unreadable (crypto-shredding)."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, state


@click.command()
@click.option("--tenant", help="Erase the values of every run of this tenant.")
@click.option("--actor", help="Erase the values of every run of this actor.")
@click.option("--run", "run_id", metavar="RUN", help="Erase the values of this run.")
@click.option("--by", help="Who erases (default: REVERSI_ACTOR, else the principal).")
@click.option("--yes", is_flag=True, help="Do it: without --yes, nothing is erased.")
@json_option
@click.pass_context
def erase(ctx: click.Context, tenant: str | None, actor: str | None, run_id: str | None, by: str | None,
          yes: bool, as_json: bool) -> int:
    """Destroy the data keys of the runs named, so their values cannot be read anywhere again.

    The journal's structure stays; each run says when its values were erased. Runs written before
    encryption was on hold their values in clear: they are listed, not erased. This cannot be undone.
    """
    if not yes:
        raise click.UsageError("erasing cannot be undone: add --yes to erase")
    with state(ctx).door() as door:
        done = door.erase_values(tenant=tenant, actor=actor, run_id=run_id, by=by)
    if as_json:
        echo_json(done.to_dict())
        return 0 if not done.clear else 2
    runs = f"{len(done.erased)} run" + ("" if len(done.erased) == 1 else "s")
    echo(f"erased the values of {runs} of {done.scope}"
         + (f" ({len(done.already)} were erased already)" if done.already else ""))
    for run in done.clear:
        echo(f"{run}: its values were written in clear, before encryption was on: not erased (reversi prune "
             "removes whole runs)")
    return 0 if not done.clear else 2

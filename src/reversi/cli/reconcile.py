"""`reversi reconcile`: settle a run's unresolved steps from what their manifests' probes read."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, manifest_option, state


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--reader-cmd", metavar="CMD", help="Runs each probe's read: {tool, arguments} on stdin, JSON out.")
@click.option("--cmd-timeout", type=float, default=30.0, show_default=True, help="Seconds each read may take.")
@click.option("--actor", default="probe", show_default=True, help="Who settles the steps, in the journal.")
@manifest_option
@json_option
@click.pass_context
def reconcile(ctx: click.Context, run_id: str, reader_cmd: str | None, cmd_timeout: float, actor: str,
              manifests: tuple[str, ...], as_json: bool) -> int:
    """Settle each intended or uncertain step of RUN whose manifest entry declares a probe, from what the
    probe reads; the others stay unresolved. Exit 2 when some step stays unresolved."""
    from reversi.core.models import check_run_id
    from reversi.engine.commands import command_read_back
    from reversi.errors import BadInput, ConfigError

    check_run_id(run_id)
    if reader_cmd is not None and not reader_cmd.strip():
        raise BadInput("--reader-cmd is empty: give a command, or leave the flag out")
    if not cmd_timeout > 0:
        raise BadInput("--cmd-timeout must be a positive number of seconds")
    if not actor.strip():
        raise BadInput("--actor is empty: give a name, or leave the flag out")
    reader_cmd = reader_cmd or state(ctx).settings(manifests).reader_cmd
    if not reader_cmd:
        raise ConfigError("nothing to read with: pass --reader-cmd, or set reader_cmd in reversi.yaml")
    read_back = command_read_back(reader_cmd, cmd_timeout, what="--reader-cmd")
    with state(ctx).door(manifests) as door:  # masked: a reader's error may quote a credential
        found = door.reconcile_by_probes(run_id, read_back, masked=True, actor=actor)
    left = [probed for probed in found if probed.outcome == "unresolved"]
    if as_json:
        echo_json({"run_id": run_id, "steps": [probed.to_dict() for probed in found], "settled": not left})
    else:
        for probed in found:
            echo(probed.describe())
        echo("every step is settled" if not left else f"{len(left)} step(s) still unresolved")
    return 2 if left else 0

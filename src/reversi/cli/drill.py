"""`reversi manifest drill`: try a tool's declared undo on a scratch server, and record the evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from reversi.cli.context import echo, echo_json, json_option, manifest_option, state

if TYPE_CHECKING:
    from reversi.core.json_values import JSONObject, LooseJSONObject


def _calls(values: tuple[str, ...], flag: str) -> tuple[tuple[str, JSONObject], ...]:
    """`TOOL` or `TOOL=JSON` options as (tool, arguments)."""
    from reversi.core.json_values import parse_json

    found = []
    for value in values:
        tool, sep, text = value.partition("=")
        args = parse_json(text, f"{flag} {tool}") if sep else {}
        if not tool.strip() or not isinstance(args, dict):
            raise click.BadParameter(f"{value!r}: expected TOOL or TOOL=JSON with a JSON object", param_hint=flag)
        found.append((tool.strip(), args))
    return tuple(found)


@click.command("drill")
@click.argument("tool")
@click.option("--upstream", required=True, metavar="CMD|URL",
              help="The server, started in a scratch folder: {scratch} in CMD (and in --env values) is that folder.")
@click.option("--args", "args_json", default="{}", metavar="JSON", help="The call's arguments ({scratch} allowed).")
@click.option("--env", multiple=True, metavar="KEY=VALUE", help="An environment variable for the server (repeatable).")
@click.option("--read", "reads", multiple=True, metavar="TOOL=JSON",
              help="A read tool and its arguments whose answer is part of the world (repeatable).")
@click.option("--setup", multiple=True, metavar="TOOL=JSON",
              help="A call made before the world is first read, to give it what existed before (repeatable).")
@click.option("--seed", metavar="CMD",
              help="A command run in the scratch folder before the server starts, to give it data on disk "
                   "({scratch} is that folder; no shell).")
@click.option("--keep", is_flag=True, help="Keep the scratch folder (its data and the drill's run).")
@click.option("--call-timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, metavar="S",
              help="Seconds to wait for each answer of the server (default 60).")
@manifest_option
@json_option
@click.pass_context
def drill(ctx: click.Context, tool: str, upstream: str, args_json: str, env: tuple[str, ...], reads: tuple[str, ...],
          setup: tuple[str, ...], seed: str | None, keep: bool, call_timeout: float, manifests: tuple[str, ...],
          as_json: bool) -> int:
    """Call TOOL on a scratch server, roll the call back through its declared undo, and compare the
    world (the server's read tools) before and after. Exit 0 when it reads back as before (or differs
    where the entry declares residue), 2 when not; the evidence is kept in the store for `coverage`."""
    from reversi.cli.rollback import NO_MANIFESTS
    from reversi.core.json_values import parse_json
    from reversi.gateway.drill import DrillRequest, drillable, run_drill
    from reversi.gateway.live import environment, run_live

    args = parse_json(args_json, "--args")
    if not isinstance(args, dict):
        raise click.BadParameter("expected a JSON object", param_hint="--args")
    cli = state(ctx)
    settings = cli.settings(manifests)
    if not settings.manifests:
        raise click.UsageError(NO_MANIFESTS)
    request = DrillRequest(tool, args, upstream, settings.manifests, environment(env), _calls(reads, "--read"),
                           _calls(setup, "--setup"), keep, call_timeout, cli.config, seed)
    with cli.door(manifests) as door:
        drillable(door.manifests, tool)  # a drill that cannot be carried out says so before anything else
        if "{scratch}" not in upstream and not any("{scratch}" in value for value in request.env.values()):
            echo("reversi: warning: {scratch} is in neither --upstream nor --env: a server that keeps its data "
                 "anywhere but its working folder is drilled on its real data", err=True)
        done = run_live(lambda: run_drill(request, door))
    if as_json:
        echo_json(done.to_dict())
    else:
        _render(done.to_dict())
    return 0 if done.verdict.passed else 2


def _render(d: LooseJSONObject) -> None:
    server = " ".join(part for part in (d["server"]["name"], d["server"]["version"]) if part) or "the server"
    echo(f"drill {d['tool']} on {server}: {d['verdict']}")
    for line in d["undo"]["lines"]:
        echo(f"  undo: {line}")
    reads = ", ".join(d["before"])
    if d["differences"]:
        echo(f"  world ({reads}) differs after the undo:")
        for line in d["differences"]:
            echo(f"    {line}")
        for sentence in d["residue"]:
            echo(f"  declared residue: {sentence}")
    else:
        echo(f"  world ({reads}): as before")
    if d["verdict"] == "untested":
        echo("  but the call changed nothing these reads show, so the undo was not put to the test: give "
                   "--args that change the world, or --read what they change")
    if d["scratch"]:
        echo(f"  scratch folder kept: {d['scratch']} (the server's data in data/, the drill's run "
                   f"{d['run_id']} in drill.db)")
    echo(f"recorded {d['drill_id']}")

"""`reversi manifest ...`: check manifests (alone, or against a server's tools), draft one from a
server's tools, see which of a server's write tools have an undo that was drilled, and print the
manifests Reversi ships for MCP servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from reversi.cli.context import echo, echo_json, json_option, manifest_option, state
from reversi.cli.drill import drill

if TYPE_CHECKING:
    from reversi.core.tool_listing import Listing

upstream_option = click.option(
    "--upstream", metavar="CMD|URL",
    help="The server: a command line started as an MCP stdio server, or a streamable HTTP URL.",
)
tools_list_option = click.option(
    "--tools-list", metavar="FILE", help="The server's tools as recorded: a JSON tools/list result."
)
env_option = click.option(
    "--env", "env", multiple=True, metavar="KEY=VALUE", help="An environment variable for the server (repeatable)."
)


@click.group()
def manifest() -> None:
    """Work with manifests."""


manifest.add_command(drill)


def _listing(upstream: str | None, tools_list: str | None, env: tuple[str, ...] = ()) -> Listing | None:
    """The tools of `--upstream` (started, listed, stopped) or of `--tools-list`; None without either."""
    if upstream is not None and tools_list is not None:
        raise click.UsageError("give --upstream or --tools-list, not both")
    if tools_list is not None:
        from reversi.engine.manifest_files import read_listing

        return read_listing(tools_list)
    if upstream is None:
        return None
    from reversi.gateway.live import environment, list_tools, run_live, upstream_spec

    spec = upstream_spec(upstream, environment(env))
    return run_live(lambda: list_tools(spec))


@manifest.command("check")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@upstream_option
@tools_list_option
@env_option
@json_option
def check(files: tuple[str, ...], upstream: str | None, tools_list: str | None, env: tuple[str, ...],
          as_json: bool) -> int:
    """Print each problem as FILE:LINE: message; exit 1 on any error (warnings alone exit 0).

    With --upstream or --tools-list, also check that the manifests fit the server's tools: every
    tool it may write with has an entry, every compensation and verification tool exists and gets
    the arguments its input schema asks for, every $args and $result path is one its schemas allow.
    """
    from reversi.engine.manifest_files import check_manifest_files, check_manifest_fit

    listing = _listing(upstream, tools_list, env)
    problems = check_manifest_files(files) if listing is None else check_manifest_fit(files, listing)
    errors = [p for p in problems if not p.warning]
    if as_json:
        echo_json({"ok": not errors, "problems": [
            {"file": p.source, "line": p.line, "message": p.message, "warning": p.warning} for p in problems]})
    else:
        for p in problems:
            echo(str(p))
        if not errors:
            against = f" against {listing.describe()}" if listing is not None else ""
            echo(f"ok: {len(files)} manifest file{'s' if len(files) != 1 else ''} checked{against}")
    return 1 if errors else 0


@manifest.command("show")
@click.argument("name", metavar="NAME")
@click.option("--path", "as_path", is_flag=True, help="Print where the file is instead of what it says.")
@click.option("--prefix", metavar="UPSTREAM",
              help="Name every tool UPSTREAM.TOOL, as a gateway with several upstreams names them.")
def show(name: str, as_path: bool, prefix: str | None) -> int:
    """Print the manifest shipped for the MCP server NAME (memory, filesystem, git, ...)."""
    import reversi.manifests
    from reversi.core.manifest_prefix import prefixed
    from reversi.errors import BadInput

    found = reversi.manifests.path(name)
    if as_path:
        if prefix is not None:
            raise BadInput("--path prints the shipped file, which has no prefix: save the --prefix output instead")
        echo(str(found))
        return 0
    text = found.read_text(encoding="utf-8")
    echo(prefixed(text, prefix) if prefix is not None else text, nl=False)
    return 0


@manifest.command("draft")
@upstream_option
@tools_list_option
@env_option
def draft(upstream: str | None, tools_list: str | None, env: tuple[str, ...]) -> int:
    """Print a starting manifest for a server's tools (YAML): reads from its annotations, undos from
    name pairs (create_X and delete_X, add_X and remove_X, ...), each guess marked # REVIEW."""
    from reversi.core.manifest_draft import draft_manifest

    listing = _listing(upstream, tools_list, env)
    if listing is None:
        raise click.UsageError("give the server: --upstream CMD|URL or --tools-list FILE")
    echo(draft_manifest(listing), nl=False)
    return 0


@manifest.command("coverage")
@upstream_option
@tools_list_option
@env_option
@manifest_option
@json_option
@click.pass_context
def coverage(ctx: click.Context, upstream: str | None, tools_list: str | None, env: tuple[str, ...],
             manifests: tuple[str, ...], as_json: bool) -> int:
    """For each of a server's write tools: its declared undo, its last drill (when, verdict), its residue."""
    from reversi.core.drill import coverage_rows

    listing = _listing(upstream, tools_list, env)
    if listing is None:
        raise click.UsageError("give the server: --upstream CMD|URL or --tools-list FILE")
    with state(ctx).door(manifests) as door:
        in_force = door.manifests
        rows = coverage_rows(in_force, listing, door.drills(server=listing.server or None))
    if as_json:
        echo_json({"server": {"name": listing.server, "version": listing.version},
                   "tools": [row.to_dict() for row in rows]})
        return 0
    for row in rows:
        echo(row.to_text())
    drilled = sum(1 for row in rows if row.drill is not None)
    tools = len({row.tool for row in rows})
    undos = f" ({len(rows)} undos to drill, counting each alternative)" if len(rows) != tools else ""
    echo(f"{tools} write tool{'s' if tools != 1 else ''}{undos}, {drilled} drilled")
    if not in_force.entries:
        from reversi.cli.rollback import NO_MANIFESTS

        echo(f"note: {NO_MANIFESTS}")  # as the plan says it: each tool's undo reads "no entry"
    return 0

"""`reversi manifest check` validates manifests before anything uses them; `reversi manifest show`
prints the ones Reversi ships for MCP servers."""

from __future__ import annotations

import click

from reversi.cli.context import echo_json, json_option


@click.group()
def manifest() -> None:
    """Work with manifests."""


@manifest.command("check")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@json_option
def check(files: tuple[str, ...], as_json: bool) -> int:
    """Print each problem as FILE:LINE: message; exit 1 on any error (warnings alone exit 0)."""
    from reversi.engine.manifest_files import check_manifest_files

    problems = check_manifest_files(files)
    errors = [p for p in problems if not p.warning]
    if as_json:
        echo_json({"ok": not errors, "problems": [
            {"file": p.source, "line": p.line, "message": p.message, "warning": p.warning} for p in problems]})
    else:
        for p in problems:
            click.echo(str(p))
        if not errors:
            click.echo(f"ok: {len(files)} manifest file{'s' if len(files) != 1 else ''} checked")
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
        click.echo(str(found))
        return 0
    text = found.read_text(encoding="utf-8")
    click.echo(prefixed(text, prefix) if prefix is not None else text, nl=False)
    return 0

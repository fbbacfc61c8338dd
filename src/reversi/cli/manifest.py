"""`reversi manifest check`: validate manifests before anything uses them."""

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

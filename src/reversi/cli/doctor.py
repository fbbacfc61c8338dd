"""`reversi doctor`: the store, the files, encryption and retention as this process finds them."""

from __future__ import annotations

import click

from reversi.cli.context import echo, echo_json, json_option, state


@click.command()
@json_option
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> int:
    """Check the store and the files Reversi keeps; exit 1 when something is looser than it should be."""
    from reversi.engine.doctor import examine

    settings = state(ctx)
    findings = examine(config=settings.config, db=settings.db)
    ok = all(f.ok for f in findings)
    if as_json:
        echo_json({"ok": ok, "checks": [f.to_dict() for f in findings]})
    else:
        for f in findings:
            echo(f"{'ok ' if f.ok else 'BAD'}  {f.name}: {f.detail}" + (f"\n     fix: {f.fix}" if f.fix and not f.ok
                                                                          else ""))
        echo("all good" if ok else "something is looser than it should be: see BAD above")
    return 0 if ok else 1

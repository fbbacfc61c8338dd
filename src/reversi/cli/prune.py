"""`reversi prune`: delete the settled runs older than the retention window, listing those kept back."""

from __future__ import annotations

from pathlib import Path

import click

from reversi.cli.context import echo, echo_json, json_option, manifest_option, state


@click.command()
@click.option("--older-than", metavar="DURATION",
              help="Prune runs opened before this long ago (90d, 12h); default: the configured retention.")
@click.option("--dry-run", is_flag=True, help="Say what would go and what stays; change nothing.")
@click.option("--export", "export_file", metavar="FILE",
              help="First write the pruned runs' events to FILE, a new file, as `reversi export` prints them.")
@manifest_option
@json_option
@click.pass_context
def prune(ctx: click.Context, older_than: str | None, dry_run: bool, export_file: str | None,
          manifests: tuple[str, ...], as_json: bool) -> int:
    """Delete the runs opened before the window whose every step is settled; list the runs kept back and why."""
    from reversi.core.retention import texts
    from reversi.core.times import parse_duration
    from reversi.errors import BadInput, ConfigError

    if dry_run and export_file is not None:
        raise BadInput("--dry-run writes no export: leave out --dry-run or --export")
    if export_file is not None and not export_file.strip():
        raise BadInput("--export is empty: give a new file's name")
    window = parse_duration(older_than, what="--older-than") if older_than is not None else None
    pruned = kept = 0
    found: list[dict[str, object]] = []
    with state(ctx).door(manifests) as door:
        if window is None and door.settings.retention is None:
            raise ConfigError("no retention window: pass --older-than DURATION (e.g. 90d), or set `retention: 90d` "
                              "in reversi.yaml or REVERSI_RETENTION=90d")
        pass_ = door.pruning(window, dry_run=dry_run, export=Path(export_file) if export_file else None)
        before = pass_.cutoff
        for outcome in pass_.run():
            pruned, kept = pruned + outcome.pruned, kept + (not outcome.pruned)
            if as_json:
                found.append(outcome.to_dict())
                continue
            run = outcome.run
            if outcome.pruned:
                echo(f"{'would prune' if dry_run else 'pruned'} {run.run_id} (opened {run.created_at})")
            else:
                echo(f"kept {run.run_id} (opened {run.created_at}): {texts(outcome.holds)}")
    if as_json:
        echo_json({"cutoff": before, "dry_run": dry_run, "export": export_file,
                   "pruned": [o for o in found if "kept_because" not in o],
                   "kept": [o for o in found if "kept_because" in o]})
        return 0
    verb = "would prune" if dry_run else "pruned"
    echo(f"{verb} {_runs(pruned)} opened before {before}; kept {_runs(kept)}" if before is not None
         else "no run is that old")
    if export_file is not None and not dry_run:
        echo(f"their events are in {export_file}")
    return 0


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"

"""`reversi runs`, `show` and `export`: what was recorded."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from reversi.cli.context import echo, echo_json, echo_json_text, json_option, manifest_option, state
from reversi.core import redaction
from reversi.core.json_values import compact
from reversi.core.models import EventType
from reversi.core.standing import Next

if TYPE_CHECKING:
    from reversi.core.checkpoints import Checkpoint
    from reversi.core.models import RunSummary
    from reversi.engine.principal_ledger import PrincipalLedger

_PAGE = 1000  # runs read per page (the most a page holds)


def _since(value: str | None) -> str | None:
    if value is None:
        return None
    from reversi.core.times import parse_since

    return parse_since(value, what="--since")


@click.command()
@click.option("--status", help="Keep runs with a step in this status (e.g. uncertain, succeeded).")
@click.option("--actor", help="Only runs of this actor.")
@click.option("--tenant", help="Only runs of this tenant.")
@click.option("--since", help="Only runs opened since (30m, 2h, 7d, or a date).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many runs.")
@click.option("--expiring", metavar="DURATION",
              help="Instead: the standing steps whose undo windows close within DURATION (24h, 7d), soonest first.")
@manifest_option
@json_option
@click.pass_context
def runs(ctx: click.Context, status: str | None, actor: str | None, tenant: str | None, since: str | None,
         limit: int | None, expiring: str | None, manifests: tuple[str, ...], as_json: bool) -> int:
    """List runs, newest first, with counts of their steps."""
    if expiring is not None:
        if any(v is not None for v in (status, actor, tenant, since, limit)):
            from reversi.errors import BadInput

            raise BadInput("--expiring takes no other filter: it looks at every run with a standing step")
        return _expiring(ctx, expiring, manifests, as_json)

    with state(ctx).door(reading=True) as door:
        found = _every_run(door, status, actor, tenant, _since(since), limit)
    if as_json:
        echo_json([s.to_dict() for s in found])
        return 0
    if not found:
        echo("no runs")
        return 0
    rows = [[d["run_id"], d["created_at"], d["actor"] or "-", d["tenant"] or "-", str(d["steps"]),
             str(d["standing"]), str(d["unresolved"])] for d in (s.to_dict() for s in found)]
    for line in _columns(["RUN", "CREATED", "ACTOR", "TENANT", "STEPS", "STANDING", "UNRESOLVED"], rows, numbers=3):
        echo(line)
    return 0


def _every_run(door: PrincipalLedger, status: str | None, actor: str | None, tenant: str | None, since: str | None,
               limit: int | None) -> list[RunSummary]:
    """The runs the filters keep, newest first, page by page: every one, or the first `limit`."""
    found: list[RunSummary] = []
    after = None
    while limit is None or len(found) < limit:
        want = _PAGE if limit is None else min(_PAGE, limit - len(found))
        page = door.list_runs(status=status, actor=actor, tenant=tenant, since=since, after=after, limit=want)
        found += page.items
        if page.next is None:
            break
        after = page.next
    return found


def _expiring(ctx: click.Context, within: str, manifests: tuple[str, ...], as_json: bool) -> int:
    from reversi.core.times import parse_duration

    span = parse_duration(within, what="--expiring")
    with state(ctx).door(manifests, reading=True) as door:
        found, more = door.closing(span)
    if as_json:
        echo_json([c.to_dict() for c in found])
        return 0
    if not found:
        echo(f"no standing step's undo window closes within {within}")
    else:
        rows = [[c.run_id, str(c.step), c.tool, c.closes, c.left] for c in found]
        for line in _columns(["RUN", "STEP", "TOOL", "CLOSES", "LEFT"], rows, numbers=1):
            echo(line)
    if more:
        echo("(only the 1000 newest runs with standing steps were looked at)")
    return 0


def _columns(header: list[str], rows: list[list[str]], numbers: int) -> list[str]:
    """A table as text, each column as wide as its widest cell; the last `numbers` columns right-aligned."""
    texts = [[" ".join(cell.split()) for cell in row] for row in rows]  # one line per row, whatever a cell holds
    widths = [max(len(cell) for cell in column) for column in zip(header, *texts, strict=True)]
    first = len(header) - numbers
    return [" ".join(cell.ljust(w) if i < first else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths,
                                                                                                      strict=True)))
            .rstrip() for row in [header, *texts]]


@click.command()
@click.argument("run_id", metavar="RUN")
@json_option
@click.pass_context
def show(ctx: click.Context, run_id: str, as_json: bool) -> int:
    """Show one run and its steps."""
    with state(ctx).door(reading=True) as door:
        run = door.get_run(run_id)
        snap, marks = run.snapshot(), run.checkpoints()
        masker = door.masker()
        snap = redaction.snapshot(masker, snap)
        standing = run.standing(masker)
        refused = [e for e in redaction.events(masker, run.events()) if e.type == EventType.REFUSED]
    out = snap.to_dict() | {"checkpoints": [c.to_dict() for c in marks], "where_it_stands": standing.to_dict(),
                            "refused": [{"at": e.at, "actor": e.actor, **e.data} for e in refused]}
    if as_json:
        echo_json(out)
        return 0
    scope = ", ".join(f"{k}={out[k]}" for k in ("actor", "tenant", "environment") if out[k])
    echo(f"{run_id}  mode={out['mode']}  principal={out['principal']}  {scope}".rstrip())
    echo(f"opened {out['created_at']}; {_count(out['steps_count'], 'step')}, {out['standing']} standing, "
               f"{out['unresolved']} unresolved")
    if out["labels"]:
        echo("labels: " + ", ".join(f"{k}={v}" for k, v in sorted(out["labels"].items())))
    _checkpoints_after(-1, marks)
    for step in snap.steps:
        detail = compact(step.result) if step.has_result else (step.error or "")
        echo(f"step {step.index}  {step.tool}  {step.status.value}  {compact(step.args)}  {detail}".rstrip())
        _checkpoints_after(step.index, marks)
    for event in refused:  # calls that never became steps: what was asked, and why not
        said = event.data
        line = f"refused  {said.get('tool')}  {compact(said.get('args', {}))}  {said.get('reason', '')}  {event.at}"
        echo(" ".join(line.splitlines()))  # one line per refusal, whatever its text holds
    if standing.undone or any(s.next is not Next.ROLL_BACK for s in standing.left):
        echo("where it stands:")
        echo(standing.to_text())
    return 0


def _checkpoints_after(step: int, marks: list[Checkpoint]) -> None:
    """The timeline's lines for the checkpoints taken right after `step`."""
    for mark in marks:
        if mark.after_step == step:
            echo(f"-- checkpoint {mark.name!r}  {mark.at}")


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


@click.command()
@click.option("--run", "run_id", metavar="RUN", help="Only this run (default: every run).")
@click.option("--since", help="Only events since (30m, 2h, 7d, or a date).")
@json_option
@click.pass_context
def export(ctx: click.Context, run_id: str | None, since: str | None, as_json: bool) -> int:
    """Print the journal as JSON lines, in seq order (`--json` changes nothing: it is JSON already)."""
    with state(ctx).door(reading=True) as door:
        for event in door.export(run_id, _since(since)):
            echo_json_text(compact(event.to_dict()))
    return 0

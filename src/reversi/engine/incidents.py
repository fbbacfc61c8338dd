"""Rollbacks of many runs (`reversi.core.scopes`): planning a selection, containing it, undoing it.

The plan is one walk across the selected runs (`plan_selection`). The rollback undoes it in passes:
each pass rolls back every selected run, newest first, each under its own rollback lease with the
executor every single-run rollback uses, which reads what stands in every other run from the journal
at that moment. A step held back by a later step of another selected run is undone in a later pass,
once that step is; passes stop when one undoes nothing more. So the idempotency keys stay per run and
step, a crash leaves nothing a re-run cannot finish, and two overlapping rollbacks never undo a step
twice (the run's lease and the journal see to it, as for one run).

`contain` first stops new calls in the selection: a halt for its actor, tenant and tool (what halts
can match; within the tenant of a confined admin), and for `key`, every active key of that principal
is revoked (a key alone is stopped by that, and nobody else's calls are halted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reversi.core import redaction
from reversi.core.backoff import Retry
from reversi.core.models import HaltScope, RunSnapshot
from reversi.core.plan import ActionKind
from reversi.core.scopes import ScopePlan, ScopeReport, Selection, plan_selection
from reversi.core.sensitive import Masker
from reversi.engine import halts, keys
from reversi.engine.lineage import lineage_secret, read_lineage, standing_elsewhere
from reversi.engine.rollback import check_concurrency
from reversi.errors import BadInput, RollbackInProgress
from reversi.store.queries import Queries

if TYPE_CHECKING:
    from reversi.engine.ledger import Ledger
    from reversi.engine.rollback import Compensate
    from reversi.engine.run import RollbackArguments

__all__ = ["Containment", "check_options", "contain", "plan_scope", "rollback_scope", "selected"]

MAX_PASSES = 1000  # far above any real chain of runs holding each other back; a guard, not a limit


def selected(q: Queries, selection: Selection, within: str | None = None) -> list[RunSnapshot]:
    """The snapshots of the selected runs (of tenant `within` only, when given) that have a step the
    selection covers, newest run first."""
    if within is not None and selection.tenant not in (None, within):
        return []
    runs = [r for r in q.list_runs(actor=selection.actor, tenant=selection.tenant or within)
            if selection.selects(r) and (selection.until is None or r.created_at <= selection.until)]
    scope = selection.step_scope
    return [s for s in q.snapshots(runs) if s.steps and (scope is None or any(scope.covers(x) for x in s.steps))]


def plan_scope(ledger: Ledger, selection: Selection, within: str | None = None, *,
               masker: Masker | None = None) -> ScopePlan:
    """The plan of rolling back `selection` (of tenant `within` only, when given); with `masker`, as it
    may be shown (sensitive values masked)."""
    secret = lineage_secret(ledger.store)
    with ledger.store.read() as q:
        snapshots = selected(q, selection, within)
        lineage = read_lineage(q, snapshots, ledger.manifests, secret)
        stands = standing_elsewhere(q, lineage, snapshots)
    found = plan_selection(selection, snapshots, ledger.manifests, lineage, stands, datetime.now(UTC))
    if masker is None:
        return found
    return redaction.scope_plan(redaction.learn(masker, (s for snap in snapshots for s in snap.steps)), found)


@dataclass(frozen=True)
class Containment:
    """What `contain` did, as lines for the report."""

    halt_id: str | None
    revoked: tuple[str, ...]

    def lines(self) -> list[str]:
        out = [f"contained: halt {self.halt_id} stops new calls in the scope"] if self.halt_id else []
        return out + [f"contained: key {key_id} revoked" for key_id in self.revoked]


def contain(ledger: Ledger, selection: Selection, reason: str | None, by: str, *, within: str | None = None,
            revoke: Callable[[str], Any] | None = None) -> Containment:
    """Stop new calls in the selection before it is rolled back: a halt of its actor, tenant and tool
    (of tenant `within`, for a confined admin), and the revocation of `key`'s active keys; `reason` is
    the halt's (by default, it names the scope).

    Raises:
        BadInput: nothing to stop: no actor, tenant or tool for a halt, and no active key to revoke.
    """
    reason = reason or f"contained for a rollback: {selection.describe().removeprefix('scope: ')}"[:500]
    halt_id = None
    if selection.actor or selection.tool or selection.tenant:  # a key alone is stopped by its revocation
        scope = HaltScope(selection.tool, _exact(selection.actor), selection.tenant or within, None)
        halt_id = halts.add_halt(ledger.store, reason, scope, by, ledger.principal).halt_id
    revoked: list[str] = []
    if selection.key is not None:
        for row in keys.list_keys(ledger.store, within):
            if row.name == selection.key and row.revoked_at is None:
                (revoke or (lambda key_id: keys.revoke_key(ledger.store, key_id, within, by=by,
                                                          last_admin=True)))(row.key_id)
                revoked.append(row.key_id)
    if halt_id is None and not revoked:
        keyless = f"no active key is named {selection.key}, and " if selection.key is not None else ""
        raise BadInput(f"contain has nothing to stop: {keyless}a halt needs an actor, a tenant or a tool "
                       "(labels and times match no halt)")
    return Containment(halt_id, tuple(revoked))


def _exact(actor: str | None) -> str | None:
    """An actor's name as a halt's glob that matches it alone."""
    if actor is None:
        return None
    return "".join(f"[{c}]" if c in "*?[" else c for c in actor)


def check_options(options: RollbackArguments) -> None:
    """Check a scope rollback's options before anything is contained (a halt, a key revoked).

    Raises:
        BadInput: a retry policy or a concurrency out of range.
    """
    Retry.of(options.get("retry"))
    check_concurrency(options.get("concurrency", 1))


async def rollback_scope(
    ledger: Ledger,
    selection: Selection,
    compensate: Compensate | None,
    options: RollbackArguments,
    *,
    within: str | None = None,
    contained: Sequence[str] = (),
    check: Callable[[], None] | None = None,
) -> ScopeReport:
    """Undo `selection` in passes (see the module); each run's rollback takes `options` as
    `Run.arollback` does; `check()` is called before each run (a job's lease: it raises to stop).

    A run another rollback holds (a process rolling it back, an overlapping scope) is left to it and
    listed under `in_progress`: the report is then incomplete, and a re-run finishes what is left.

    Raises:
        ConfigError, Fenced, StoreUnavailable: as `Run.arollback`.
    """
    report = ScopeReport(selection, contained=list(contained))
    each: RollbackArguments = {**options, "scope": selection.step_scope}
    plan = await asyncio.to_thread(plan_scope, ledger, selection, within)
    order = plan.run_ids
    todo = order  # every run once, for its report; then those the fresh plan still has steps to undo in
    for _ in range(MAX_PASSES):
        undone = 0
        for run_id in todo:
            if check is not None:
                await asyncio.to_thread(check)  # a job's worker that was taken over stops here (Fenced)
            try:
                done = await (await asyncio.to_thread(ledger.get_run, run_id)).arollback(compensate, **each)
            except RollbackInProgress:  # another rollback (a run, an overlapping scope) holds it: left to that one
                if run_id not in report.in_progress:
                    report.in_progress.append(run_id)
                continue
            if run_id in report.in_progress:
                report.in_progress.remove(run_id)
            report.reports[run_id] = done
            report.compensated.setdefault(run_id, []).extend(done.compensated)
            undone += len(done.compensated)
        if not undone:
            break
        plan = await asyncio.to_thread(plan_scope, ledger, selection, within)
        todo = [run_id for run_id in plan.run_ids
                if any(a.kind is ActionKind.COMPENSATE for r, a in plan.actions if r == run_id)]
    report.reports = {run_id: report.reports[run_id] for run_id in order if run_id in report.reports}
    return report

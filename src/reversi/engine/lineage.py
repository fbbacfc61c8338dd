"""Reading the lineage of runs from the store: which steps, in this run and others of the tenant,
touched the same resources later (`reversi.core.resources`), and whether those still stand.

Plans and rollbacks read it in the transaction that reads the snapshots they walk, so what they
defer is what the journal said at that moment; a rollback reads it again on each re-run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reversi.core.manifest import ManifestSet
from reversi.core.models import RunSnapshot
from reversi.core.resources import Lineage, RunLineage, resource_key, resources_of
from reversi.core.walk import reference_context
from reversi.store.base import Store
from reversi.store.queries import Queries

__all__ = ["lineage_secret", "read_lineage", "run_lineage", "run_lineages", "standing_elsewhere"]


def lineage_secret(store: Store) -> bytes:
    """The key the journal's resource hashes are made under (the store's own, the same everywhere)."""
    return store.secret("masking")


def read_lineage(q: Queries, snapshots: Sequence[RunSnapshot], manifests: ManifestSet, secret: bytes) -> Lineage:
    """The lineage of these runs' steps: every touch of a resource one of them touched."""
    own = q.run_touches([s.run.run_id for s in snapshots])
    if not own:
        return Lineage(())
    by_run = {s.run.run_id: s for s in snapshots}

    def name_of(run_id: str, step: int) -> dict[str, str]:
        snapshot = by_run[run_id]
        state = snapshot.step(step)
        texts = resources_of(manifests.lookup(state.tool), reference_context(snapshot, state))
        return {resource_key(secret, snapshot.run.scope.tenant, t): t for t in texts}

    return Lineage(q.touches_of({t.key for t in own}), name_of)


def standing_elsewhere(q: Queries, lineage: Lineage, snapshots: Sequence[RunSnapshot]) -> Callable[[str, int], bool]:
    """Whether a step of a run not among `snapshots` stands (or may: its outcome is unknown)."""
    others = lineage.later_elsewhere(s.run.run_id for s in snapshots)
    statuses = q.step_statuses(sorted(others)) if others else {}

    def stands(run_id: str, step: int) -> bool:
        status = statuses.get((run_id, step))
        return status is not None and (status.stands or status.unresolved)

    return stands


def run_lineage(q: Queries, snapshot: RunSnapshot, manifests: ManifestSet, secret: bytes) -> RunLineage:
    """What one run's walk needs of the lineage: steps of other runs that depend on its steps and
    stand now hold those back."""
    (found,) = run_lineages(q, [snapshot], manifests, secret)
    return found


def run_lineages(q: Queries, snapshots: Sequence[RunSnapshot], manifests: ManifestSet,
                 secret: bytes) -> list[RunLineage]:
    """`run_lineage` of each run, each walked alone (a listing's page of plans), read with one pass:
    what stands in the other runs is read from their snapshots here, or from the store."""
    lineage = read_lineage(q, snapshots, manifests, secret)
    elsewhere = standing_elsewhere(q, lineage, snapshots)
    here = {(s.run.run_id, step.index): step.status.stands or step.status.unresolved
            for s in snapshots for step in s.steps}

    def stands(run_id: str, step: int) -> bool:
        found = here.get((run_id, step))
        return elsewhere(run_id, step) if found is None else found

    def others_of(me: str) -> Callable[[str, int], bool]:
        return lambda run_id, step: run_id != me and stands(run_id, step)

    return [lineage.for_run(s.run.run_id, len(s.steps), lineage.standing(others_of(s.run.run_id)))
            for s in snapshots]

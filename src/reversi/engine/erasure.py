"""Erasure by crypto-shredding: the data keys of a tenant's, an actor's or one run's runs are destroyed,
so their values (arguments, results, errors, captures, read-backs) cannot be read anywhere any more,
while the journal's structure stays: audits still count what happened, and each run's journal says when
its values were erased and by whom (`values_erased`). A plan of a step still standing then says it can
no longer be undone, and why.

Runs written before encryption was on hold their values in clear: erasure cannot reach them, and says
which they are (`reversi prune` removes whole runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reversi.core.json_values import JSONObject
from reversi.core.models import EventType, NewEvent, RunRecord, check_run_id, utc_now
from reversi.errors import BadInput, NotFound
from reversi.store.base import Store

__all__ = ["Erasure", "erase_values"]

_BATCH = 200


@dataclass
class Erasure:
    """What `erase_values` did: runs whose values it erased now, runs erased before, runs in clear."""

    scope: str
    erased: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)

    def to_dict(self) -> JSONObject:
        return {"scope": self.scope, "erased": list(self.erased), "already_erased": list(self.already),
                "in_clear": list(self.clear)}


def _scope(tenant: str | None, actor: str | None, run_id: str | None) -> str:
    given = [(name, value) for name, value in (("tenant", tenant), ("actor", actor), ("run", run_id))
             if value is not None]
    if len(given) != 1:
        raise BadInput("say whose values to erase: one of a tenant, an actor or a run")
    name, value = given[0]
    if not value:
        raise BadInput(f"the {name} to erase is empty")
    return f"{name} {value}"


def erase_values(store: Store, *, tenant: str | None = None, actor: str | None = None, run_id: str | None = None,
                 by: str, within: str | None = None, batch: int = _BATCH,
                 on_batch: Callable[[int], None] | None = None) -> Erasure:
    """Destroy the data keys of every run of `tenant`, of `actor`, or of the run `run_id` (with
    `within`, of that tenant's runs only), a batch of runs per transaction, journaling `values_erased`
    in each run whose keys it destroyed. Safe to repeat: a run cut short is finished by running it again.
    `on_batch` is told how many runs were looked at after each committed batch.

    Raises:
        BadInput: not exactly one of tenant, actor and run; a malformed run id.
        NotFound: no such run.
    """
    done = Erasure(_scope(tenant, actor, run_id))
    if run_id is not None:
        check_run_id(run_id)
    before: tuple[str, str] | None = None
    while True:
        with store.read() as q:
            if run_id is not None:
                found = q.get_run(run_id)
                if found is None or (within is not None and found.scope.tenant != within):
                    raise NotFound(f"no run {run_id}")
                runs: list[RunRecord] = [found]
            else:
                runs = q.list_runs(tenant=tenant if within is None else within, actor=actor, before=before,
                                   limit=batch)
        if runs:
            _erase_batch(store, runs, done, by)
            if on_batch is not None:
                on_batch(len(done.erased) + len(done.already) + len(done.clear))
        if run_id is not None or len(runs) < batch:
            return done
        before = (runs[-1].created_at, runs[-1].run_id)


def _erase_batch(store: Store, runs: list[RunRecord], done: Erasure, by: str) -> None:
    now = utc_now()
    with store.write() as q:
        for run in runs:
            keys = q.run_data_keys(run.run_id)
            if not keys:
                done.clear.append(run.run_id)
                continue
            q.lock_run(run.run_id)
            erased = q.erase_data_keys([run.run_id], now)
            if erased:
                q.append(run.run_id, [NewEvent(EventType.VALUES_ERASED, None, by,
                                               {"scope": done.scope, "data_keys": erased})])
                done.erased.append(run.run_id)
            else:
                done.already.append(run.run_id)

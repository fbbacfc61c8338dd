"""The Ledger: a store, the manifests in force and the principal, with everything done through them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tenacity import retry, retry_if_exception_type, stop_after_attempt

from reversi.core.manifest import ManifestSet
from reversi.core.models import (
    Approval,
    Event,
    EventType,
    Halt,
    HaltScope,
    Mode,
    NewEvent,
    RunRecord,
    RunSummary,
    Scope,
    StepStatus,
    check_run_id,
    new_run_id,
    utc_now,
)
from reversi.engine import approvals, halts
from reversi.engine.config import Settings, actor_from_env, load_settings, principal_from_env
from reversi.engine.manifest_files import load_manifest_files
from reversi.engine.recorder import Recorder
from reversi.engine.run import Run
from reversi.errors import BadInput, Forbidden, NotFound, WriteConflict
from reversi.store.base import Store, open_store


@dataclass(frozen=True)
class RunFilter:
    status: str | None = None
    actor: str | None = None
    tenant: str | None = None
    since: str | None = None
    limit: int | None = None


def _text(value: object, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadInput(f"{name} must be a string")
    return value


class Ledger:
    """The journal of every run in one store. Open it with `reversi.open()`; close it when done."""

    def __init__(self, store: Store, manifests: ManifestSet, *, principal: str, settings: Settings,
                 owns_store: bool = True) -> None:
        self.store = store
        self.manifests = manifests
        self.principal = principal
        self.settings = settings
        self.recorder = Recorder(store, manifests, settings.kill_switch_file)
        self._owns_store = owns_store

    def acting_as(self, principal: str) -> Ledger:
        """The same ledger acting for another principal (a server's per-request view); closing it is a no-op."""
        return Ledger(self.store, self.manifests, principal=principal, settings=self.settings, owns_store=False)

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def actor(self, explicit: str | None) -> str:
        """Who did an operator action: `explicit`, else REVERSI_ACTOR, else the principal."""
        return actor_from_env(explicit, self.principal)

    # -- runs ------------------------------------------------------------------------------------

    def start_run(
        self,
        run_id: str | None = None,
        *,
        actor: str = "",
        tenant: str = "",
        environment: str = "",
        mode: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> Run:
        """Open a new run, or continue `run_id` if it exists (its mode and scope stay as they were).

        `mode` defaults to the configured one (`mode:` in reversi.yaml, REVERSI_MODE), else observe.

        Raises:
            BadInput: a bad run id, mode or scope.
            Forbidden: `run_id` was opened by another principal.
        """
        try:
            run_mode = Mode(mode or self.settings.mode or Mode.OBSERVE.value)
        except ValueError:
            raise BadInput(f"mode must be observe or enforce, not {mode!r}") from None
        if labels is not None and not (
            isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        ):
            raise BadInput("labels must map strings to strings")
        record = RunRecord(
            check_run_id(run_id) if run_id is not None else new_run_id(),
            self.principal,
            run_mode,
            Scope(_text(actor, "actor"), _text(tenant, "tenant"), _text(environment, "environment")),
            dict(labels or {}),
            utc_now(),
        )
        return self._open_or_continue(record)

    @retry(retry=retry_if_exception_type(WriteConflict), stop=stop_after_attempt(3), reraise=True)
    def _open_or_continue(self, record: RunRecord) -> Run:
        """Insert the run, or journal `run_continued` on the one there (again, if the database undid
        the write to break a lock cycle with another writer)."""
        with self.store.write() as q:
            q.lock_name(f"run:{record.run_id}")  # two processes opening one new id: one creates, one continues
            existing = q.get_run(record.run_id)
            if existing is None:
                q.insert_run(record)
                q.append(
                    record.run_id,
                    [
                        NewEvent(
                            EventType.RUN_OPENED,
                            None,
                            record.scope.actor or self.principal,
                            {
                                "principal": record.principal,
                                "mode": record.mode.value,
                                "scope": {
                                    "actor": record.scope.actor,
                                    "tenant": record.scope.tenant,
                                    "environment": record.scope.environment,
                                },
                                "labels": dict(record.labels),
                            },
                        )
                    ],
                )
                return Run(self, record)
            self._check_owner(existing)
            q.lock_run(existing.run_id)
            q.append(
                existing.run_id,
                [
                    NewEvent(
                        EventType.RUN_CONTINUED,
                        None,
                        existing.scope.actor or self.principal,
                        {"principal": self.principal},
                    )
                ],
            )
        return Run(self, existing)

    def continue_run(self, run_id: str) -> Run:
        """Continue a run this principal opened.

        Raises:
            NotFound: no such run.
            Forbidden: another principal opened it.
        """
        existing = self.get_run(run_id)
        self._check_owner(existing.record)
        return self.start_run(run_id)

    def _check_owner(self, record: RunRecord) -> None:
        if record.principal != self.principal:
            raise Forbidden(f"{record.run_id} belongs to another principal")

    def get_run(self, run_id: str) -> Run:
        """Any run in the store, to read or operate on (the SDK on the store is as trusted as the store).

        Raises:
            BadInput: a bad run id.
            NotFound: no such run.
        """
        check_run_id(run_id)
        with self.store.read() as q:
            record = q.get_run(run_id)
        if record is None:
            raise NotFound(f"no run {run_id}")
        return Run(self, record)

    def list_runs(self, filters: RunFilter | None = None) -> list[RunSummary]:
        """Runs newest first, with counts of their steps.

        Raises:
            BadInput: `status` is not a step status.
        """
        f = filters or RunFilter()
        if f.status is not None and f.status not in {s.value for s in StepStatus}:
            raise BadInput(f"status {f.status!r} is not one of {', '.join(s.value for s in StepStatus)}")
        summaries = []
        with self.store.read() as q:
            for record in q.list_runs(actor=f.actor, tenant=f.tenant, since=f.since):
                summary = q.run_summary(record)
                if f.status is None or f.status in summary.statuses:
                    summaries.append(summary)
                if f.limit is not None and len(summaries) >= f.limit:
                    break
        return summaries

    def export(self, run_id: str | None = None, since: str | None = None) -> Iterator[Event]:
        """The journal as events: one run's in `seq` order, or every run's, run by run, then the halts'
        (`halt_added`, `halt_lifted`, with `run_id` None: they belong to no run)."""
        if run_id is not None:
            self.get_run(run_id)
            with self.store.read() as q:
                events = q.run_events(run_id)
            yield from (e for e in events if since is None or e.at >= since)
            return
        with self.store.read() as q:
            events = list(q.export(since))
            halts = q.system_events(since)
        yield from events
        yield from halts

    # -- halts, the kill file, approvals -----------------------------------------------------------

    def add_halt(
        self,
        reason: str,
        *,
        tool: str | None = None,
        actor: str | None = None,
        tenant: str | None = None,
        environment: str | None = None,
        by: str | None = None,
    ) -> Halt:
        return halts.add_halt(self.store, reason, HaltScope(tool, actor, tenant, environment), self.actor(by))

    def halts(self, tenant: str | None = None) -> list[Halt]:
        """The active halts; with `tenant`, those scoped to exactly that tenant."""
        return halts.list_halts(self.store, tenant)

    def lift_halts(self, halt_id: str | None = None, by: str | None = None, tenant: str | None = None) -> int:
        """Lift one halt, or all (of `tenant`, when given); returns how many."""
        return halts.lift_halts(self.store, halt_id, self.actor(by), tenant)

    def approvals(self, status: str | None = None, run_id: str | None = None) -> list[Approval]:
        return approvals.list_approvals(self.store, status, run_id)

    def approve(self, approval_id: str, by: str | None = None, note: str | None = None) -> Approval:
        return approvals.decide(self.store, approval_id, approve=True, by=self.actor(by), note=note)

    def deny(self, approval_id: str, note: str, by: str | None = None) -> Approval:
        return approvals.decide(self.store, approval_id, approve=False, by=self.actor(by), note=note)


def open(
    db: str | None = None, *, manifests: Sequence[str] = (), principal: str | None = None, config: str | None = None
) -> Ledger:
    """Open the ledger in the store `db` (else REVERSI_DB, else `db:` in reversi.yaml, else the embedded
    SQLite file `.reversi/reversi.db`), with the manifests in force.

    Raises:
        ManifestError: a manifest is invalid.
        StoreUnavailable: the store cannot be reached.
    """
    settings = load_settings(config=config, db=db, manifests=tuple(manifests))
    manifest_set = load_manifest_files(settings.manifests) if settings.manifests else ManifestSet.empty()
    store = open_store(settings.db)
    return Ledger(store, manifest_set, principal=principal_from_env(principal), settings=settings)

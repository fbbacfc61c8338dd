"""The Ledger: a store, the manifests in force and the principal, with everything done through them."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, Unpack

import anyio
from tenacity import retry, retry_if_exception_type, stop_after_attempt

from reversi.core import redaction
from reversi.core.bounded_cache import BoundedCache
from reversi.core.checkpoints import Checkpoint
from reversi.core.drill import Drill
from reversi.core.json_values import JSON, LooseJSONObject
from reversi.core.manifest import ManifestSet
from reversi.core.models import (
    Approval,
    Event,
    EventType,
    Halt,
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
from reversi.core.scopes import ScopePlan, ScopeReport, Selection
from reversi.core.sensitive import Masker, SensitivePath
from reversi.core.surfaces import Surface
from reversi.core.times import parse_time
from reversi.core.windows import Closing
from reversi.engine import access, approvals, drills, halts, incidents, jobs, retention
from reversi.engine.capture import Captured
from reversi.engine.commands import command_compensator
from reversi.engine.config import Settings, actor_from_env, load_settings, principal_from_env
from reversi.engine.encryption import Rotation, keyring_from_env
from reversi.engine.erasure import Erasure
from reversi.engine.keys import Principal, Role, store_has_keys
from reversi.engine.manifest_files import load_manifest_files
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.engine.recorder import Recorder
from reversi.engine.rollback import Compensate, ReadBack
from reversi.engine.run import RollbackArguments, Run, run_coroutine
from reversi.errors import BadInput, Forbidden, NotFound, Refused, WriteConflict
from reversi.store.base import Store
from reversi.store.factory import open_store
from reversi.store.keys import KeyRow

_RUNS_KEPT = 4096  # run records kept by `run_record`


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


def _failing(error: Exception) -> Callable[[LooseJSONObject], object]:
    """A hook that cannot be run: each hand-off fails with `error`."""

    def hook(data: LooseJSONObject) -> object:
        raise error

    return hook


class Ledger:
    """The journal of every run in one store. Open it with `reversi.open()`; close it when done."""

    def __init__(self, store: Store, manifests: ManifestSet, *, principal: str, settings: Settings,
                 owns_store: bool = True, _runs: BoundedCache[str, RunRecord] | None = None,
                 _recorder: Recorder | None = None) -> None:
        self.store = store
        self.manifests = manifests
        self.principal = principal
        self.settings = settings
        self.recorder = _recorder or Recorder(store, manifests, settings.kill_switch_file, settings.durability)
        self._owns_store = owns_store
        self._runs: BoundedCache[str, RunRecord] = _runs if _runs is not None else BoundedCache(_RUNS_KEPT)

    def acting_as(self, principal: str) -> Ledger:
        """The same ledger acting for another principal (a server's per-request view); closing it is a no-op."""
        return Ledger(self.store, self.manifests, principal=principal, settings=self.settings, owns_store=False,
                      _runs=self._runs, _recorder=self.recorder)

    def for_principal(self, principal: Principal, surface: Surface = Surface.SDK) -> PrincipalLedger:
        """The ledger as `principal` may use it through `surface`: its role and tenant applied to every
        call, the surface's defaults to what a call leaves out (the surfaces' door)."""
        return PrincipalLedger(self, principal, surface)

    def as_local_admin(self, surface: Surface) -> PrincipalLedger:
        """The door of whoever holds the store (the CLI, a stdio gateway): this ledger's principal as an
        admin of every tenant, with no key. It names REVERSI_ACTOR as acting where a call names nobody."""
        return self.for_principal(Principal(self.principal, Role.ADMIN), surface)

    def _local(self) -> PrincipalLedger:
        # The SDK's operator actions are the local admin's: the door decides them, as for every surface.
        return self.as_local_admin(Surface.SDK)

    def rotate_data(self, *, batch: int = 200, on_batch: Callable[[int], None] | None = None) -> Rotation:
        """Move every data key onto the current key-encryption key; see `encryption.rotate_data`."""
        return self._local().rotate_data(batch=batch, on_batch=on_batch)

    def erase_values(self, *, tenant: str | None = None, actor: str | None = None, run_id: str | None = None,
                     by: str | None = None, batch: int = 200,
                     on_batch: Callable[[int], None] | None = None) -> Erasure:
        """Erase the values of a tenant's, an actor's or one run's runs; see `erasure.erase_values`."""
        return self._local().erase_values(tenant=tenant, actor=actor, run_id=run_id, by=by, batch=batch,
                                          on_batch=on_batch)

    def masker(self) -> Masker:
        """A new masker for one view: the store's masking key, the configured names, the manifests' paths
        (see `reversi.core.redaction` for what it masks)."""
        manifests = self.manifests

        def paths(tool: str) -> tuple[SensitivePath, ...]:
            entry = manifests.lookup(tool)
            return entry.sensitive if entry is not None else ()

        return Masker(self.store.secret("masking"), frozenset(self.settings.sensitive_keys), paths)

    def close(self) -> None:
        """Commit the outcomes still waiting (durability `intent`), then close the store if this ledger opened it."""
        if self._owns_store:
            try:
                self.store.flush_writes()
            finally:
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

    def run_record(self, run_id: str) -> RunRecord:
        """A run's record, kept once read (it never changes), for the surfaces' hot paths.

        Raises:
            BadInput: a bad run id.
            NotFound: no such run.
        """
        record = self._runs.get(run_id)
        return record if record is not None else self._runs.put(run_id, self.get_run(run_id).record)

    async def arun_record(self, run_id: str) -> RunRecord:
        """`run_record` without blocking the event loop."""
        record = self._runs.get(run_id)
        return record if record is not None else await anyio.to_thread.run_sync(self.run_record, run_id)

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

    def closing(
        self, within: timedelta, *, now: datetime | None = None, scan: int = 1000, tenant: str | None = None,
        principal: str | None = None,
    ) -> tuple[list[Closing], bool]:
        """The standing steps whose undo windows close within `within` (of `now`), soonest first, in the
        `scan` newest runs with standing steps (of `tenant`, of `principal`, when given); and whether
        more runs were left unscanned. Each run is planned, so this costs a plan per run scanned. A
        span past the calendar's end takes every window."""
        now = now or datetime.now(UTC)
        try:
            until = now + within
        except OverflowError:  # a span past the year 9999: every window closes before then
            until = datetime.max.replace(tzinfo=UTC)
        found: list[Closing] = []
        scanned = 0
        with self.store.read() as q:
            records = [r for r in q.list_runs(tenant=tenant)
                       if (principal is None or r.principal == principal) and q.run_summary(r).standing]
        for record in records[:scan]:
            scanned += 1
            for action in self.get_run(record.run_id).plan(now=now).actions:
                window = action.compensation.window if action.compensation is not None else None
                if window is not None and window.closes is not None and parse_time(window.closes) <= until:
                    found.append(Closing(record.run_id, action.step, action.tool, window.closes, window.left or ""))
        return sorted(found, key=lambda c: (c.closes, c.run_id, c.step)), len(records) > scanned

    # -- rollbacks of many runs (`reversi.engine.incidents`) -----------------------------------------

    def plan_scope(self, selection: Selection, *, masked: bool = False) -> ScopePlan:
        """The plan of rolling back every run and step `selection` covers, as one walk newest first
        across runs, honouring dependencies within and across runs; `masked`: as it may be shown."""
        return incidents.plan_scope(self, selection, masker=self.masker() if masked else None)

    async def arollback_scope(
        self, selection: Selection, compensate: Compensate | None = None, *, contain: bool = False,
        reason: str | None = None, **options: Unpack[RollbackArguments],
    ) -> ScopeReport:
        """`rollback_scope` without blocking the event loop."""
        incidents.check_options(options)
        contained = []
        if contain:
            done = await asyncio.to_thread(incidents.contain, self, selection, reason, self.actor(options.get("actor")))
            contained = done.lines()
        return await incidents.rollback_scope(self, selection, compensate, options, contained=contained)

    def rollback_scope(
        self, selection: Selection, compensate: Compensate | None = None, *, contain: bool = False,
        reason: str | None = None, **options: Unpack[RollbackArguments],
    ) -> ScopeReport:
        """Undo every run and step `selection` covers (see `reversi.engine.incidents`), each run under its
        own lease with `Run.rollback`'s options; `contain` first halts the scope (and, for a key,
        revokes it) so that nothing new lands meanwhile, with `reason` for the halt.

        Raises:
            BadInput: as `contain`.
            ConfigError, Fenced, StoreUnavailable: as `Run.rollback` (a run another rollback holds is
                left to it and listed under the report's `in_progress`).
        """
        return run_coroutine(self.arollback_scope(selection, compensate, contain=contain, reason=reason, **options))

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

    def pruning(self, window: timedelta | None = None, **options: Any) -> retention.Pruning:
        """A pass of retention over this store (`retention.Pruning`; `options` are its fields) by `window`,
        else the configured `retention:`. Raises ConfigError: neither is given."""
        chosen = window if window is not None else retention.retention_window(self.settings)
        return retention.Pruning(self.store, self.manifests, chosen, masker=self.masker, **options)

    def apply_retention(self, stop: Callable[[], bool], on_pruned: Callable[[], None]) -> retention.PassResult | None:
        """A server's pass of the configured retention; see `retention.apply_retention`. Raises as that,
        and ConfigError: no retention is configured."""
        return retention.apply_retention(self.store, self.manifests, retention.retention_window(self.settings),
                                         lease_s=self.settings.rollback_lease_s, stop=stop, on_pruned=on_pruned)

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
        """Stop new calls that match the scope (`actor`: the runs' actor glob; `by`: who halts them)."""
        return self._local().add_halt(reason, tool=tool, actor=actor, tenant=tenant, environment=environment, by=by)

    def halts(self, tenant: str | None = None) -> list[Halt]:
        """The active halts; with `tenant`, those scoped to exactly that tenant."""
        return halts.list_halts(self.store, tenant)

    def lift_halts(self, halt_id: str | None = None, by: str | None = None, tenant: str | None = None) -> int:
        """Lift one halt, or all (of `tenant`, when given); returns how many."""
        return self._local().lift_halts(halt_id, by=by, tenant=tenant)

    def approvals(self, status: str | None = None, run_id: str | None = None) -> list[Approval]:
        return approvals.list_approvals(self.store, status, run_id)

    def approve(self, approval_id: str, by: str | None = None, note: str | None = None) -> Approval:
        """Approve a pending (or earlier denied) request; see `approvals.decide`."""
        return self._local().approve(approval_id, note=note, by=by)

    def deny(self, approval_id: str, note: str, by: str | None = None) -> Approval:
        """Deny a request (a note is required); see `approvals.decide`."""
        return self._local().deny(approval_id, note=note, by=by)


    def approval(self, approval_id: str) -> Approval:
        """One approval.

        Raises:
            NotFound: no such approval.
        """
        return approvals.get_approval(self.store, approval_id)

    def kill_reason(self) -> str | None:
        """The kill file's reason when it is on (`""` when empty), else None, as the recorder reads it:
        a kill file that cannot be read shows as on (calls are refused then)."""
        return self.recorder.kill_reason()

    # -- recording for a caller on an event loop (the gateway) -----------------------------------------

    async def abegin(self, run: RunRecord, tool: str, args: object, depends_on: Sequence[int] = (), *,
                     via: Mapping[str, JSON] | None = None, before: Captured | None = None) -> int:
        """`Recorder.abegin`: journal `intended` without blocking the loop. Raises as `Recorder.begin`."""
        return await self.recorder.abegin(run, tool, args, depends_on, via=via,
                                          before=before)

    async def acheckpoint(self, run: RunRecord, name: object) -> Checkpoint:
        """`Recorder.checkpoint` without blocking the loop (the gateway's `reversi.checkpoint` tool)."""
        return await self.store.arun_write(self.recorder.checkpoint_write(run, name), order=run.run_id)

    async def astopped(self, run: RunRecord, tool: str) -> bool:
        """`Recorder.stopped` off the loop: would a halt or the kill switch refuse this call now?"""
        return await asyncio.to_thread(self.recorder.stopped, run, tool)

    async def arefuse(self, run: RunRecord, tool: str, args: object, refusal: Refused) -> NoReturn:
        """`Recorder.arefuse`: journal a call refused before any check (its capture failed), and raise `refusal`."""
        await self.recorder.arefuse(run, tool, args, refusal)

    async def aoutcome(self, run: RunRecord, step: int, status: StepStatus, *, result: object = None,
                       error: str | None = None) -> None:
        """`Recorder.aoutcome`: journal an outcome without blocking the loop. Raises as `Recorder.outcome`."""
        await self.recorder.aoutcome(run, step, status, result=result, error=error)

    # -- keys and sessions (who a request is: see `reversi.engine.access`) -----------------------------

    def authenticate(self, key: str | None, *, local_ok: bool) -> Principal:
        """The principal of a request carrying `key`; see `access.authenticate`.

        Raises:
            Unauthorized: no valid key (or, with no keys in the store, a request that may not act as `local`).
        """
        with self.store.read() as q:
            return access.authenticate(q, key, local_ok)

    def has_keys(self) -> bool:
        """Whether the store holds any key, even a revoked one (see `keys.store_has_keys`)."""
        return store_has_keys(self.store)

    def session_principal(self, key_id: str | None, token: str, *, local_ok: bool) -> Principal | None:
        """Who a console session is; see `access.session_principal`."""
        with self.store.read() as q:
            return access.session_principal(q, key_id, token, local_ok)

    def sign_out(self, token: str, until: str) -> None:
        """Remember that the console session of `token` was signed out, until its cookie expires."""
        with self.store.write() as q:
            q.sign_out(access.session_hash(token), until, utc_now())

    def create_key(self, name: str, role: str, tenant: str | None = None) -> tuple[KeyRow, str]:
        """Create an API key; returns its row and the key (shown this once). Raises as `keys.create_key`."""
        return self._local().create_key(name, role, tenant)

    def list_keys(self) -> list[KeyRow]:
        """Every API key (never their secrets), oldest first."""
        return self._local().list_keys()

    def revoke_key(self, key_id: str, *, last_admin: bool = False) -> KeyRow:
        """Revoke an API key at once; `last_admin` revokes even the last admin key. Raises as `keys.revoke_key`."""
        return self._local().revoke_key(key_id, last_admin=last_admin)

    # -- drills (`reversi manifest drill` and `coverage`) -----------------------------------------------

    def record_drill(self, drill: Drill) -> None:
        """Keep a drill's evidence in the store."""
        drills.record_drill(self.store, drill)

    def drills(self, tool: str | None = None, server: str | None = None, limit: int | None = None) -> list[Drill]:
        """Drills newest first, of `tool` and of `server` (its name) when given."""
        return drills.list_drills(self.store, tool, server, limit)

    # -- rollback jobs (the server's worker) ---------------------------------------------------------

    def job_runner(self, compensate: Compensate, read_back: ReadBack | None = None,
                   on_done: Callable[[jobs.Job], None] | None = None) -> jobs.JobRunner:
        """A runner of this store's rollback jobs, with the manifests in force."""
        return jobs.JobRunner(self.store, self.manifests, compensate, read_back, on_done,
                              self.settings.rollback_lease_s, self.follow_up_hook())

    def follow_up_hook(self) -> Callable[[LooseJSONObject], Awaitable[object]] | None:
        """The configured `follow_up_cmd`, told each follow-up a rollback opens with its run's sensitive
        values masked (it goes to an issue tracker); None when none is configured. A command that cannot
        be run fails each hand-off (said in the report), not the rollback."""
        cmd = self.settings.follow_up_cmd
        if not cmd:
            return None
        try:
            run_hook: Callable[[LooseJSONObject], object] = command_compensator(
                cmd, what="follow_up_cmd (REVERSI_FOLLOW_UP_CMD)")
        except BadInput as exc:
            run_hook = _failing(exc)

        async def told(data: LooseJSONObject) -> object:
            steps = await asyncio.to_thread(lambda: self.get_run(str(data["run_id"])).steps())
            answer = run_hook(redaction.learn(self.masker(), steps).value(data))
            return await answer if inspect.isawaitable(answer) else answer

        return told

    def unfinished_jobs(self) -> list[jobs.Job]:
        """The rollback jobs not done yet, whoever queued them."""
        return jobs.unfinished_jobs(self.store)

    def requeue_job(self, job: jobs.Job, lease: jobs.Lease) -> None:
        """Put a job this process stopped running back in the queue (a clean shutdown); see `jobs.requeue`."""
        jobs.requeue(self.store, job, lease)


def open(
    db: str | None = None, *, manifests: Sequence[str] = (), principal: str | None = None, config: str | None = None,
    durability: str | None = None,
) -> Ledger:
    """Open the ledger in the store `db` (else REVERSI_DB, else `db:` in reversi.yaml, else the embedded
    SQLite file `.reversi/reversi.db`), with the manifests in force.

    `durability` (else REVERSI_DURABILITY, else `durability:` in reversi.yaml, else `full`): with `full`,
    a call's outcome is durable before `run.call` returns (two commits a call); with `intent`, only its
    `intended` is waited for, and the outcome commits with the next write or within milliseconds (one
    commit a call): a crash in between leaves the step `intended`, unresolved, never wrong.

    Raises:
        ConfigError: `durability` is neither `full` nor `intent`.
        ManifestError: a manifest is invalid.
        ConfigError: REVERSI_ENCRYPTION_KEYS cannot be read as keys (see `reversi.engine.encryption`).
        StoreUnavailable: the store cannot be reached.
    """
    return open_with(load_settings(config=config, db=db, manifests=tuple(manifests), durability=durability),
                     principal=principal)


def open_with(settings: Settings, *, principal: str | None = None) -> Ledger:
    """Open the ledger that `settings` describe (`open` without reading the settings again)."""
    manifest_set = load_manifest_files(settings.manifests) if settings.manifests else ManifestSet.empty()
    keyring = keyring_from_env()
    store = open_store(settings.db)
    store.use_keyring(keyring)
    return Ledger(store, manifest_set, principal=principal_from_env(principal), settings=settings)

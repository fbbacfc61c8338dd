"""`PrincipalLedger`: the ledger as one principal may use it, from `Ledger.for_principal`.

Every method applies the access policy (`reversi.engine.access`) itself: the role it needs, the
principal's tenant on every listing, the run's owner for recording. A surface (the server's API and
console, the gateway) acts only through it, so none can forget a filter (tests/test_layers.py holds
them to it). It also decides for every surface what one would otherwise decide on its own: a rollback
job needs a compensator to run it, and a rollback that names no attempts takes its `Surface`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, Unpack

import anyio

from reversi.core import redaction
from reversi.core.backoff import Retry
from reversi.core.checkpoints import Checkpoint
from reversi.core.drill import Drill
from reversi.core.follow_ups import FollowUpState
from reversi.core.halts import can_stop_tenant
from reversi.core.json_values import JSON, LooseJSON
from reversi.core.manifest import ManifestSet
from reversi.core.models import (
    Approval,
    Event,
    Halt,
    HaltScope,
    RunRecord,
    RunSnapshot,
    RunSummary,
    StepState,
    StepStatus,
    check_run_id,
)
from reversi.core.plan import Plan
from reversi.core.planner import plan_rollback
from reversi.core.probes import Probed
from reversi.core.retention import cutoff
from reversi.core.scopes import ScopePlan, ScopeReport, Selection
from reversi.core.sensitive import Masker
from reversi.core.standing import RunStanding
from reversi.core.surfaces import Surface
from reversi.core.windows import Closing
from reversi.engine import approvals, encryption, erasure, halts, incidents, jobs, keys, retention, scope_jobs
from reversi.engine.access import (
    Access,
    check_run,
    check_still_valid,
    halt_tenant,
    in_reach,
    key_tenant,
    listing_owner,
    listing_tenant,
    require_role,
    run_tenant,
)
from reversi.engine.capture import Captured
from reversi.engine.config import Settings, actor_from_env
from reversi.engine.encryption import Rotation
from reversi.engine.erasure import Erasure
from reversi.engine.keys import Principal, Role
from reversi.engine.lineage import lineage_secret, run_lineages
from reversi.engine.paging import RunPage, RunQuery, list_runs_page
from reversi.engine.rollback import Compensate, ReadBack, check_concurrency
from reversi.engine.run import RollbackArguments, Run, run_coroutine
from reversi.engine.scope_jobs import ScopeJob
from reversi.errors import BadInput, Forbidden, NoCompensator, NotFound, Refused
from reversi.store.keys import KeyRow
from reversi.store.queries import Queries

if TYPE_CHECKING:
    from reversi.engine.ledger import Ledger

T = TypeVar("T")


class Attention(Enum):
    """Runs that need a person: a step whose outcome is unknown, an undo that failed, an approval asked;
    and the runs retention keeps past its window (`retained`: it found something in them still open)."""

    ANY = "any"
    UNRESOLVED = "unresolved"
    UNDO_FAILED = "undo_failed"
    APPROVAL = "approval"
    RETAINED = "retained"

    @property
    def statuses(self) -> frozenset[str]:
        """The step statuses that need a person in this way."""
        unresolved = {StepStatus.INTENDED.value, StepStatus.UNCERTAIN.value}
        failed = {StepStatus.COMPENSATION_FAILED.value}
        return frozenset({Attention.ANY: unresolved | failed, Attention.UNRESOLVED: unresolved,
                          Attention.UNDO_FAILED: failed}.get(self, set()))

    @property
    def approvals(self) -> bool:
        return self in (Attention.ANY, Attention.APPROVAL)


class PrincipalLedger:
    """The ledger acting as `principal` through `surface`, with its role and tenant applied to every call."""

    def __init__(self, ledger: Ledger, principal: Principal, surface: Surface = Surface.SDK) -> None:
        self._base = ledger
        self.principal = principal
        self.surface = surface

    @property
    def _holds_the_store(self) -> bool:
        """Whether this principal has no key: whoever runs the process on the store (or a server without keys)."""
        return self.principal.key_id is None

    def _by(self, named: str | None) -> str:
        """Who is journaled as acting when a call names nobody: REVERSI_ACTOR for whoever runs the CLI or
        the SDK (the local admin, with no key), else the principal's name (a server's or a gateway's
        environment speaks for none of its callers)."""
        if named:
            return named
        if self.surface.is_local and self._holds_the_store:
            return actor_from_env(None, self.principal.name)
        return self.principal.name

    @property
    def _ledger(self) -> Ledger:
        """The ledger acting as this principal (who opens runs, who is journaled as acting)."""
        return self._base.acting_as(self.principal.name)

    # -- runs ------------------------------------------------------------------------------------

    def run_record(self, run_id: str, access: Access) -> RunRecord:
        """The record of `run_id`, if this principal may do `access` on it.

        Raises:
            BadInput: a bad run id.
            NotFound: no such run.
            Forbidden: `RUN belongs to another principal` (or the role that `access` needs).
        """
        record = self._base.run_record(run_id)
        check_run(self.principal, record, access)
        return record

    async def arun_record(self, run_id: str, access: Access) -> RunRecord:
        """`run_record` without blocking the event loop (a run read once is not read again)."""
        record = await self._base.arun_record(run_id)
        check_run(self.principal, record, access)
        return record

    def get_run(self, run_id: str, access: Access = Access.READ) -> Run:
        """The run, to read (`READ`), record in (`RECORD`) or operate on (`OPERATE`); raises as `run_record`."""
        return Run(self._ledger, self.run_record(run_id, access))

    def run_to_continue(self, run_id: str) -> RunRecord | None:
        """The run `run_id` names if it exists and this principal may record in it; None when there
        is no such run yet (opening it creates it under that id).

        Raises:
            BadInput: a bad run id.
            Forbidden: another principal's run.
        """
        try:
            return self.run_record(check_run_id(run_id), Access.RECORD)
        except NotFound:
            return None

    def open_run(self, run_id: str | None = None, *, actor: str = "", tenant: str = "", environment: str = "",
                 mode: str | None = None, labels: dict[str, str] | None = None) -> tuple[Run, bool]:
        """Open a run (its tenant the key's, if the key has one), or continue `run_id`; returns the run
        and whether it existed.

        Raises:
            BadInput: a bad run id, mode, scope or labels.
            Forbidden: `run_id` is another principal's run.
        """
        existing = self.run_to_continue(run_id) if run_id is not None else None
        run = self._ledger.start_run(run_id, actor=actor, tenant=run_tenant(self.principal, tenant),
                                     environment=environment, mode=mode, labels=labels)
        return run, existing is not None

    def list_runs(self, *, status: str | None = None, actor: str | None = None, tenant: str | None = None,
                  since: str | None = None, after: tuple[str, str] | None = None, limit: int = 100,
                  contains: Mapping[str, str] | None = None, attention: Attention | None = None) -> RunPage:
        """A page of the runs this principal sees, newest first: an agent its own, an operator those of
        its tenant (or every tenant's). `contains`: text found, whatever its case, in the run's `actor`,
        its `tenant`, or `any` of its id, actor, tenant and environment; `attention`: only the runs that
        need it, in that way.

        Raises:
            BadInput: `status` is not a step status, `limit` is not 1-1000, or `attention` is `retained`
                and no retention is configured.
        """
        possible, tenant = listing_tenant(self.principal, tenant)
        if not possible:  # a confined principal filtering on another tenant
            return RunPage([], None)
        any_status, or_runs, opened_before = None, frozenset[str](), None
        if attention is Attention.RETAINED:
            opened_before = self.retention_cutoff()
            if opened_before is None:
                raise BadInput("no retention is configured: no run is kept past it")
        elif attention is not None:
            any_status = attention.statuses
            if attention.approvals and self.principal.is_operator:
                or_runs = frozenset(self.awaiting_approval())
        searched = tuple((part, text) for part, text in (contains or {}).items() if text)
        query = RunQuery(status, actor, tenant, since, listing_owner(self.principal), searched, any_status, or_runs,
                         opened_before)
        return list_runs_page(self._base.store, query, after=after, limit=limit)

    def retention_cutoff(self) -> str | None:
        """Runs opened before this time are past the configured retention (None: none is configured)."""
        window = self._base.settings.retention
        return None if window is None else cutoff(datetime.now(UTC), window)

    def retained_count(self) -> int | None:
        """How many of the runs this principal sees are past the retention window and still kept (retention
        found something still open in them, or has not passed since they crossed it); None: no retention."""
        before = self.retention_cutoff()
        if before is None:
            return None
        with self._base.store.read() as q:
            return q.count_runs(opened_before=before, tenant=self.principal.tenant,
                                principal=listing_owner(self.principal))

    def attention_counts(self) -> dict[str, int]:
        """How many of the runs this principal sees need a person, in each way (`Attention` values; `any`
        counts a run once), counted over every run in the store; and `retained`, when retention is
        configured."""
        possible, tenant = listing_tenant(self.principal, None)
        counts = {a.value: 0 for a in Attention if a is not Attention.RETAINED}
        if not possible:
            return counts
        kinds = (Attention.UNRESOLVED, Attention.UNDO_FAILED)
        with self._base.store.read() as q:
            found = q.runs_with_steps_in(sorted(Attention.ANY.statuses), tenant=tenant,
                                         principal=listing_owner(self.principal))
        runs = {kind: set().union(*(found[status] for status in kind.statuses)) for kind in kinds}
        runs[Attention.APPROVAL] = set(self.awaiting_approval()) if self.principal.reads_tenant else set()
        runs[Attention.ANY] = set().union(*runs.values())
        counts |= {kind.value: len(ids) for kind, ids in runs.items()}
        retained = self.retained_count()
        return counts if retained is None else counts | {Attention.RETAINED.value: retained}

    def awaiting_approval(self) -> dict[str, int]:
        """The runs of this operator's reach with pending approvals, and how many each has."""
        counts: dict[str, int] = {}
        for approval in self.approvals("pending"):
            counts[approval.run_id] = counts.get(approval.run_id, 0) + 1
        return counts

    def closing(self, within: timedelta, *, tenant: str | None = None,
                now: datetime | None = None) -> tuple[list[Closing], bool]:
        """The standing steps whose undo windows close within `within`, soonest first, in the runs this
        principal sees (as `list_runs`: an agent its own, an operator those of its tenant, or of
        `tenant`); and whether runs were left unscanned (see `Ledger.closing`)."""
        possible, tenant = listing_tenant(self.principal, tenant)
        if not possible:
            return [], False
        return self._base.closing(within, now=now, tenant=tenant, principal=listing_owner(self.principal))

    def closing_runs(self, within: timedelta, *, tenant: str | None = None, now: datetime | None = None
                     ) -> tuple[list[tuple[RunSummary, list[Closing]]], bool]:
        """`closing` by run: each run with a window closing within `within`, the soonest first, with
        its steps whose windows close then, soonest first."""
        found, more = self.closing(within, tenant=tenant, now=now)
        steps: dict[str, list[Closing]] = {}
        for closing in found:
            steps.setdefault(closing.run_id, []).append(closing)
        records = []
        for run_id in steps:
            try:
                records.append(self._base.run_record(run_id))
            except NotFound:  # pruned or erased since it was planned
                continue
        with self._base.store.read() as q:
            return [(q.run_summary(record), steps[record.run_id]) for record in records], more

    def plans(self, runs: Sequence[RunRecord]) -> list[Plan]:
        """The rollback plan of each run (read together: a listing's page).

        Raises:
            Forbidden: a run this principal may not read.
        """
        for record in runs:
            check_run(self.principal, record, Access.READ)
        manifests, secret = self._base.manifests, lineage_secret(self._base.store)
        now = datetime.now(UTC)
        with self._base.store.read() as q:
            snapshots = q.snapshots(runs)
            read = list(zip(snapshots, run_lineages(q, snapshots, manifests, secret), strict=True))
        return [redaction.plan(redaction.learn(self._base.masker(), snap.steps),
                               plan_rollback(snap, manifests, lineage=lineage, now=now)) for snap, lineage in read]

    # What a person is shown of a run: sensitive values masked (`reversi.core.redaction`).

    def snapshot(self, run_id: str) -> RunSnapshot:
        """The run and its steps as they may be shown; raises as `run_record`."""
        snap = self.get_run(run_id, Access.READ).snapshot()
        return redaction.snapshot(self._base.masker(), snap)

    def events(self, run_id: str, *, after: int | None = None, limit: int | None = None) -> list[Event]:
        """The run's journal in `seq` order as it may be shown: the events after `after`, at most
        `limit`; raises as `run_record`."""
        self.run_record(run_id, Access.READ)
        with self._base.store.read() as q:
            found = q.run_events(run_id, after=after, limit=limit)
            snap = q.snapshot(run_id)
        masker = redaction.learn(self._base.masker(), snap.steps if snap is not None else ())
        tools: redaction.Tools = {(run_id, s.index): s.tool for s in (snap.steps if snap is not None else ())}
        return list(redaction.events(masker, found, tools))

    def export(self, run_id: str | None = None, since: str | None = None) -> Iterator[Event]:
        """The journal as `Ledger.export` gives it, as it may be shown (each run's values masked with
        what that run holds): one run's, or every run's and then the halts'.

        Raises:
            As `run_record` (one run); Forbidden: every run's, for a principal that does not read them all
                (an agent, or a key confined to a tenant).
        """
        if run_id is not None:
            self.run_record(run_id, Access.READ)
        elif not self.principal.reads_tenant or self.principal.tenant is not None:
            raise Forbidden("exporting every run's journal needs a key that reads every run: name one run")
        return self._shown(self._base.export(run_id, since))  # checked above, before the first event is read

    def _shown(self, events: Iterator[Event]) -> Iterator[Event]:
        masker, current = self._base.masker(), None
        tools: redaction.Tools = {}
        for event in events:
            if event.run_id != current:  # what one run holds masks the text of that run only
                masker, tools, current = self._base.masker(), {}, event.run_id
            yield from redaction.events(masker, [event], tools)

    def plan(self, run_id: str, *, to: str | None = None, after_step: int | None = None) -> Plan:
        """The run's rollback plan as it may be shown, of the steps after checkpoint `to` or step
        `after_step` when given; raises as `run_record`, and as `Run.scope`."""
        run = self.get_run(run_id, Access.READ)
        plan = run.plan(to=to, after_step=after_step)
        return redaction.plan(redaction.learn(self._base.masker(), run.snapshot().steps), plan)

    def standing(self, run_id: str) -> RunStanding:
        """Where the run stands across its rollbacks, as it may be shown; raises as `run_record`."""
        return self.get_run(run_id, Access.READ).standing(self._base.masker())

    def masker(self) -> Masker:
        """A masker for one view of what this principal reads (see `Ledger.masker`)."""
        return self._base.masker()

    def checkpoint(self, run_id: str, name: str) -> Checkpoint:
        """Journal a checkpoint in the principal's own run (see `Run.checkpoint`).

        Raises:
            Forbidden: another principal's run.
            BadInput, Conflict: as `Run.checkpoint`.
        """
        return self.get_run(run_id, Access.RECORD).checkpoint(name)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        """The run's checkpoints, oldest first; raises as `run_record`."""
        return self.get_run(run_id, Access.READ).checkpoints()

    def resolve(self, run_id: str, step: int, status: str, *, note: str | None, actor: str | None = None,
                **result: LooseJSON) -> StepState:
        """Settle an unresolved step (`result=` to say what it returned); see `Run.resolve`.

        Raises:
            Forbidden: not an operator of the run's tenant.
            BadInput, NotFound, Conflict: as `Run.resolve`.
        """
        run = self.get_run(run_id, Access.OPERATE)
        return run.resolve(step, status, note=note, actor=self._by(actor), **result)

    def reconcile_by_probes(self, run_id: str, read_back: ReadBack, *, masked: bool = False,
                            actor: str | None = None) -> list[Probed]:
        """Settle a run's unresolved steps from their probes, journaled as `actor` (`masked`: what they
        said, as it may be shown); see `Run.reconcile_by_probes` (`actor` defaults to `probe` there).

        Raises:
            Forbidden: not an operator of the run's tenant.
        """
        run = self.get_run(run_id, Access.OPERATE)
        found = run.reconcile_by_probes(read_back, actor=actor)
        if not masked:
            return found
        masker = redaction.learn(self._base.masker(), run.steps())
        return [redaction.probed(masker, probed) for probed in found]

    def follow_ups(self, run_id: str, *, masked: bool = False) -> list[FollowUpState]:
        """A run's follow-ups (`masked`: as they may be shown); see `Run.follow_ups`.

        Raises:
            Forbidden: not an operator of the run's tenant.
        """
        return self.get_run(run_id, Access.OPERATE).follow_ups(self._base.masker() if masked else None)

    def close_follow_up(self, run_id: str, step: int, note: str, *, actor: str | None = None) -> FollowUpState:
        """Close a step's follow-up; see `Run.close_follow_up`.

        Raises:
            Forbidden: not an operator of the run's tenant.
            BadInput, NotFound, Conflict: as `Run.close_follow_up`.
        """
        return self.get_run(run_id, Access.OPERATE).close_follow_up(step, note, self._by(actor))

    # -- recording: the journal's hot path -------------------------------------------------------

    async def abegin(self, run_id: str, tool: str, args: object, depends_on: Sequence[int] = (), *,
                     before: Captured | None = None, call_id: str | None = None) -> int:
        """Journal `intended` in the principal's own run (see `Recorder.begin`), as one slot of the
        store's group commit, once the key is seen still valid in that write.

        Raises:
            Unauthorized: the key was revoked since it was read.
            Forbidden: another principal's run.
            Refused, BadInput: as `Recorder.begin`.
        """
        record = await self.arun_record(run_id, Access.RECORD)
        write = self._base.recorder.begin_write(record, tool, args, depends_on, before=before, call_id=call_id)
        return await self._awrite(write, run_id, reads_halts=True)

    async def aoutcome(self, run_id: str, step: int, status: StepStatus, *, result: object = None,
                       error: str | None = None) -> StepState:
        """Journal a call's outcome in the principal's own run; returns the step. Raises as `abegin`,
        NotFound or Conflict as `Recorder.outcome`, and Forbidden for a step the gateway called."""
        record = await self.arun_record(run_id, Access.RECORD)
        write = self._base.recorder.outcome_write(record, step, status, result=result, error=error, reported=True)
        return await self._awrite(write, run_id)

    # -- the gateway: the calls it forwards, in the runs it holds --------------------------------------
    # The gateway reads each request's key just before, and keeps each run's record: these check the
    # run against the principal in memory, and add no read to the journal's hot path.

    def require(self, role: Role) -> None:
        """Raises Forbidden unless this principal's role is at least `role` (an endpoint's own)."""
        require_role(self.principal, role)

    def check(self, run: RunRecord, access: Access) -> None:
        """Raises Forbidden unless this principal may do `access` on `run`, a record the caller holds."""
        check_run(self.principal, run, access)

    @property
    def manifests(self) -> ManifestSet:
        """The manifests in force (the gateway declares its upstreams' undos on them)."""
        return self._base.manifests

    @property
    def settings(self) -> Settings:
        """The settings in force."""
        return self._base.settings

    def _forwarding(self, run: RunRecord) -> None:
        if self.surface is not Surface.GATEWAY:
            raise Forbidden("only the gateway journals the calls it forwards and sees answered")
        check_run(self.principal, run, Access.RECORD)

    async def abegin_forwarded(self, run: RunRecord, tool: str, args: object, *, via: Mapping[str, JSON],
                               before: Captured | None = None) -> int:
        """Journal `intended` for a call the gateway forwards to upstream `via` (see `Recorder.abegin`).

        Raises:
            Forbidden: another principal's run, or not the gateway.
            Refused, BadInput: as `Recorder.begin`.
        """
        self._forwarding(run)
        write = self._base.recorder.begin_write(run, tool, args, (), via=via, before=before)
        return await self._awrite(write, run.run_id, reads_halts=True)  # the key checked again as it writes

    async def aforwarded_outcome(self, run: RunRecord, step: int, status: StepStatus, *, result: object = None,
                                 error: str | None = None) -> None:
        """Journal what the gateway saw a forwarded call do; raises as `abegin_forwarded`, and NotFound
        or Conflict as `Recorder.outcome`."""
        self._forwarding(run)
        await self._base.recorder.aoutcome(run, step, status, result=result, error=error)

    async def acheckpoint(self, run: RunRecord, name: object) -> Checkpoint:
        """Journal a checkpoint in the principal's own run, held by the caller (see `Recorder.checkpoint`).

        Raises:
            Forbidden: another principal's run.
            BadInput, Conflict: as `Recorder.checkpoint`.
        """
        check_run(self.principal, run, Access.RECORD)
        return await self._awrite(self._base.recorder.checkpoint_write(run, name), run.run_id)

    async def astopped(self, run: RunRecord, tool: str) -> bool:
        """Whether a halt or the kill switch would refuse this call in the principal's own run now."""
        check_run(self.principal, run, Access.RECORD)
        return await anyio.to_thread.run_sync(self._base.recorder.stopped, run, tool)

    async def arefuse(self, run: RunRecord, tool: str, args: object, refusal: Refused) -> NoReturn:
        """Journal a call refused before any check (its capture failed) in the principal's own run, and
        raise `refusal` (Forbidden instead for another principal's run)."""
        check_run(self.principal, run, Access.RECORD)
        await self._base.recorder.arefuse(run, tool, args, refusal)

    async def _awrite(self, fn: Callable[[Queries], T], run_id: str, *, reads_halts: bool = False) -> T:
        principal = self.principal

        def checked(q: Queries) -> T:
            check_still_valid(q, principal)
            return fn(q)

        return await self._base.store.arun_write(checked, run_id, reads_halts=reads_halts)

    # -- rollback jobs -----------------------------------------------------------------------------

    def submit_rollback(self, run_id: str, *, has_compensator: bool, actor: str | None = None,
                        approve_compensations: bool = False, attempts: int | None = None, to: str | None = None,
                        after_step: int | None = None, concurrency: int = 1) -> jobs.Job:
        """Queue a rollback job of the run (see `jobs.submit_rollback`): of the steps after checkpoint
        `to` or step `after_step` when given. `has_compensator`: whether what runs the queued jobs has a
        compensator to run them with; `attempts`: per compensation (None: the surface's default);
        `concurrency`: how many independent steps it undoes at once.

        Raises:
            Forbidden: not an operator of the run's tenant.
            BadInput, NotFound: as `Run.scope`.
            NoCompensator: no compensator (once the run and the scope are known good).
            RollbackInProgress, BadInput: as `jobs.submit_rollback`.
        """
        scope = self.get_run(run_id, Access.OPERATE).scope(to=to, after_step=after_step)
        if not has_compensator:
            raise NoCompensator()
        return jobs.submit_rollback(self._base.store, run_id, actor=self._by(actor),
                                    approve_compensations=approve_compensations,
                                    attempts=self.surface.attempts if attempts is None else attempts,
                                    principal=self.principal.name, scope=scope, concurrency=concurrency)

    def latest_job(self, run_id: str) -> jobs.Job:
        """The run's newest rollback job.

        Raises:
            Forbidden: not an operator (or a viewer) of the run's tenant.
            NotFound: the run has never had one.
        """
        self.run_record(run_id, Access.READ if self.principal.role is Role.VIEWER else Access.OPERATE)
        return jobs.latest_job(self._base.store, run_id)

    # -- rollbacks of many runs --------------------------------------------------------------------

    def _within(self, selection: Selection, *, reading: bool = False) -> str | None:
        """The tenant a confined operator's selection stays in; Forbidden when it names another, or for
        less than an operator (`reading`: or a viewer)."""
        require_role(self.principal, Role.OPERATOR, reading=reading)
        confined = self.principal.tenant
        if confined is not None and selection.tenant not in (None, confined):
            raise Forbidden(f"a key confined to tenant {confined} can only roll back runs of tenant {confined}")
        return confined

    def plan_scope(self, selection: Selection) -> ScopePlan:
        """The plan of rolling back `selection` in this principal's reach, as it may be shown.

        Raises:
            Forbidden: not an operator (or a viewer), or a confined one names another tenant.
        """
        within = self._within(selection, reading=True)
        return incidents.plan_scope(self._base, selection, within, masker=self._base.masker())

    def submit_scope_rollback(self, selection: Selection, *, has_compensator: bool, actor: str | None = None,
                              approve_compensations: bool = False, attempts: int | None = None,
                              contain: bool = False, reason: str | None = None, concurrency: int = 1) -> ScopeJob:
        """Queue a rollback of `selection` in this principal's reach (see `scope_jobs`); with `contain`
        (an admin's), halt the scope and revoke `key`'s keys first, before it is queued. `has_compensator`,
        `attempts` and `concurrency` as for `submit_rollback`.

        Raises:
            Forbidden: not an operator; `contain` without an admin key; a confined key names another tenant.
            BadInput: as `incidents.contain`, `attempts` not 1-10, or `concurrency` not 1-64.
            NoCompensator: no compensator (before anything is contained).
        """
        within = self._within(selection)
        attempts = self.surface.attempts if attempts is None else attempts
        Retry(attempts=attempts)  # before anything is contained
        check_concurrency(concurrency)
        if not has_compensator:
            raise NoCompensator()
        contained = self._contain(selection, within, reason, actor) if contain else []
        return scope_jobs.submit_scope_rollback(
            self._base, selection, actor=self._by(actor), principal=self.principal.name, within=within,
            approve_compensations=approve_compensations, attempts=attempts, contained=contained,
            concurrency=concurrency)

    async def arollback_scope(self, selection: Selection, compensate: Compensate | None, *, contain: bool = False,
                              reason: str | None = None, **options: Unpack[RollbackArguments]) -> ScopeReport:
        """Roll back `selection` in this principal's reach now, in this process (the gateway's operator
        tools); as `submit_scope_rollback` otherwise. The report holds values as journaled: mask it
        (`redaction.report`) before it is shown.

        Raises:
            As `submit_scope_rollback`, and as `Run.arollback`.
        """
        within = self._within(selection)
        incidents.check_options(options)  # before anything is contained
        named = options.get("actor")
        contained = await anyio.to_thread.run_sync(self._contain, selection, within, reason, named) if contain else []
        acting = self._base.acting_as(self.principal.name)
        return await incidents.rollback_scope(acting, selection, compensate, options, within=within,
                                              contained=contained)

    def rollback_scope(self, selection: Selection, compensate: Compensate | None, *, contain: bool = False,
                       reason: str | None = None, **options: Unpack[RollbackArguments]) -> ScopeReport:
        """`arollback_scope` for a caller with no event loop (the CLI)."""
        return run_coroutine(self.arollback_scope(selection, compensate, contain=contain, reason=reason, **options))

    def _contain(self, selection: Selection, within: str | None, reason: str | None, named: str | None) -> list[str]:
        require_role(self.principal, Role.ADMIN)
        # A halt and a revocation are journaled as the key that made them, whatever actor a request names;
        # whoever holds the store names whom it likes, and may revoke even the last admin key (a leaked one).
        holds_the_store = self._holds_the_store
        by = self._by(named) if holds_the_store else self.principal.name
        done = incidents.contain(self._base.acting_as(self.principal.name), selection, reason, by, within=within,
                                 revoke=lambda key_id: keys.revoke_key(self._base.store, key_id, within, by=by,
                                                                       last_admin=holds_the_store))
        return done.lines()

    def scope_job(self, job_id: str) -> ScopeJob:
        """A rollback job of many runs this principal queued or may see.

        Raises:
            Forbidden: not an operator (or a viewer).
            NotFound: no such job in this principal's reach.
        """
        require_role(self.principal, Role.OPERATOR, reading=True)
        return scope_jobs.get_scope_job(self._base, job_id, self.principal.tenant)

    # -- the store's upkeep: retention, drills --------------------------------------------------------

    def pruning(self, window: timedelta | None = None, **options: Any) -> retention.Pruning:
        """A pass of retention over the whole store (see `Ledger.pruning`).

        Raises:
            Forbidden: not an admin of every tenant.
            ConfigError: neither `window` nor a configured retention.
        """
        self._unconfined(Role.ADMIN, "prunes the store")
        return self._base.pruning(window, **options)

    def drills(self, tool: str | None = None, server: str | None = None, limit: int | None = None) -> list[Drill]:
        """The drills kept in the store, newest first (see `Ledger.drills`).

        Raises:
            Forbidden: not an operator of every tenant (a drill's evidence is the whole store's, in clear).
        """
        self._unconfined(Role.OPERATOR, "reads the drills' evidence")
        return self._base.drills(tool, server, limit)

    def record_drill(self, drill: Drill) -> None:
        """Keep a drill's evidence in the store.

        Raises:
            Forbidden: not an operator of every tenant (what `manifest coverage` reads is the whole store's).
        """
        self._unconfined(Role.OPERATOR, "keeps a drill's evidence")
        self._base.record_drill(drill)

    # -- approvals ---------------------------------------------------------------------------------

    def approvals(self, status: str | None = None, run_id: str | None = None, *,
                  after: tuple[int, str, str] | None = None, limit: int | None = None) -> list[Approval]:
        """Approvals of the runs of this operator's tenant (or every tenant's), pending first, then
        oldest first; see `approvals.list_approvals` for `after` and `limit`.

        Raises:
            Forbidden: not an operator.
            BadInput: a bad status or run id.
        """
        require_role(self.principal, Role.OPERATOR, reading=True)
        found = approvals.list_approvals(self._base.store, status, run_id, tenant=self.principal.tenant,
                                         after=after, limit=limit)
        masker = self._base.masker()
        return [replace(a, args=redaction.approval_args(masker, a.tool, a.args)) for a in found]

    def approve(self, approval_id: str, *, note: str | None = None, by: str | None = None) -> Approval:
        """Approve (see `approvals.decide`); raises as `deny`."""
        self.approval_to_decide(approval_id)
        return approvals.decide(self._base.store, approval_id, approve=True, by=self._by(by), note=note,
                                principal=self.principal.name)

    def deny(self, approval_id: str, *, note: str, by: str | None = None) -> Approval:
        """Deny (a note is required; see `approvals.decide`).

        Raises:
            Forbidden: not an operator, or `APPROVAL belongs to another principal`.
            NotFound, BadInput, Conflict: as `approvals.decide`.
        """
        self.approval_to_decide(approval_id)
        return approvals.decide(self._base.store, approval_id, approve=False, by=self._by(by), note=note,
                                principal=self.principal.name)

    def approval_to_decide(self, approval_id: str) -> Approval:
        """The approval, if this principal may decide it: an operator of its run's tenant.

        Raises:
            Forbidden: not an operator, or `APPROVAL belongs to another principal`.
            NotFound: no such approval.
        """
        require_role(self.principal, Role.OPERATOR)
        approval = approvals.get_approval(self._base.store, approval_id)
        if not in_reach(self.principal, self._base.run_record(approval.run_id).scope.tenant):
            raise Forbidden(f"{approval_id} belongs to another principal")
        return approval

    # -- halts -------------------------------------------------------------------------------------

    def halts(self) -> list[Halt]:
        """The active halts this principal sees: every one, or (confined to a tenant) that tenant's."""
        return halts.list_halts(self._base.store, self.principal.tenant)

    def halts_in_force(self) -> list[tuple[Halt, bool]]:
        """Every active halt that can refuse this principal's calls (for a principal confined to a
        tenant, one whose tenant glob matches it, or that names no tenant), and whether this principal
        may lift it (`lift_halts` sees it)."""
        tenant = self.principal.tenant
        liftable = {h.halt_id for h in self.halts()} if self.principal.is_admin else set()
        return [(h, h.halt_id in liftable) for h in halts.list_halts(self._base.store)
                if tenant is None or can_stop_tenant(h, tenant)]

    def add_halt(self, reason: str, *, tool: str | None = None, actor: str | None = None,
                 tenant: str | None = None, environment: str | None = None, by: str | None = None) -> Halt:
        """Stop new calls that match the scope (`actor`: the runs' actor glob; `by`: who halts them); an
        admin confined to a tenant halts that tenant only.

        Raises:
            Forbidden: not an admin, or a confined admin asks for another tenant.
            BadInput: as `halts.add_halt`.
        """
        require_role(self.principal, Role.ADMIN)
        scope = HaltScope(tool, actor, halt_tenant(self.principal, tenant), environment)
        return halts.add_halt(self._base.store, reason, scope, self._by(by), self.principal.name)

    def erase_values(self, *, tenant: str | None = None, actor: str | None = None, run_id: str | None = None,
                     by: str | None = None, batch: int = 200,
                     on_batch: Callable[[int], None] | None = None) -> Erasure:
        """Erase the values of a tenant's, an actor's or one run's runs (see `erasure.erase_values`); an
        admin confined to a tenant erases within it only.

        Raises:
            Forbidden: not an admin, or a confined admin names another tenant.
            BadInput, NotFound: as `erasure.erase_values`.
        """
        require_role(self.principal, Role.ADMIN)
        confined = self.principal.tenant
        if confined is not None and tenant not in (None, confined):
            raise Forbidden(f"a key confined to tenant {confined} can only erase tenant {confined}")
        return erasure.erase_values(self._base.store, tenant=tenant, actor=actor, run_id=run_id,
                                    by=self._by(by), within=confined, batch=batch, on_batch=on_batch)

    def lift_halts(self, halt_id: str | None = None, *, by: str | None = None, tenant: str | None = None) -> int:
        """Lift one halt, or all this principal sees (of exactly `tenant`, when given; `by`: who lifts
        them); returns how many.

        Raises:
            Forbidden: not an admin, or (confined to a tenant) a halt that can refuse its tenant's calls
                but is not only that tenant's: an admin of every tenant lifts it.
            NotFound: `halt_id` names no active halt this principal sees.
        """
        require_role(self.principal, Role.ADMIN)
        confined = self.principal.tenant
        if halt_id is not None and confined is not None:
            stops = {h.halt_id: h for h, liftable in self.halts_in_force() if not liftable}
            if halt_id in stops:
                said = stops[halt_id].scope.tenant
                whose = f"tenants matching {said!r}" if said else "every tenant"
                raise Forbidden(f"{halt_id} stops the calls of {whose}: an admin confined to tenant {confined} "
                                "may not lift it; an admin of every tenant can")
        return halts.lift_halts(self._base.store, halt_id, self._by(by), halt_tenant(self.principal, tenant),
                                principal=self.principal.name)

    # -- keys --------------------------------------------------------------------------------------

    def create_key(self, name: str, role: str, tenant: str | None = None) -> tuple[KeyRow, str]:
        """Create a key (see `keys.create_key`); an admin confined to a tenant creates keys of that tenant.

        Raises:
            Forbidden: not an admin, or a confined admin asks for a key of another tenant (or of none).
            BadInput, Conflict: as `keys.create_key`.
        """
        require_role(self.principal, Role.ADMIN)
        return keys.create_key(self._base.store, name, role, key_tenant(self.principal, tenant), by=self.principal.name)

    def list_keys(self) -> list[KeyRow]:
        """The keys this admin manages: every one, or (confined to a tenant) that tenant's.

        Raises:
            Forbidden: not an admin.
        """
        require_role(self.principal, Role.ADMIN)
        return keys.list_keys(self._base.store, self.principal.tenant)

    def revoke_key(self, key_id: str, *, last_admin: bool = False) -> KeyRow:
        """Revoke a key this admin manages; `last_admin` revokes even the last admin key.

        Raises:
            Forbidden: not an admin.
            NotFound: no such key (of the admin's tenant, when it is confined to one).
            Conflict: the last admin key, without `last_admin`.
        """
        require_role(self.principal, Role.ADMIN)
        if last_admin and not self._holds_the_store:
            raise Forbidden("only the local admin, on the store itself, may revoke the last admin key")
        return keys.revoke_key(self._base.store, key_id, self.principal.tenant, last_admin=last_admin,
                               by=self.principal.name)

    def rotate_data(self, *, batch: int = 200, on_batch: Callable[[int], None] | None = None) -> Rotation:
        """Move every data key onto the current key-encryption key (see `encryption.rotate_data`).

        Raises:
            Forbidden: not an admin of every tenant (the data keys are the whole store's).
        """
        self._unconfined(Role.ADMIN, "rotates the store's data keys")
        return encryption.rotate_data(self._base.store, batch=batch, on_batch=on_batch)

    def _unconfined(self, role: Role, what: str) -> None:
        require_role(self.principal, role)
        if self.principal.tenant is not None:
            raise Forbidden(f"a key confined to tenant {self.principal.tenant} may not do this: only an "
                            f"{role.value} of every tenant {what}")

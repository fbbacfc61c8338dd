"""The JSON endpoints under /v1: each parses its input, makes one engine call and answers with JSON.

`ENDPOINTS` is the route table: the app, the OpenAPI document and the tests all read it.
"""

from __future__ import annotations

from starlette.responses import Response

from reversi.core.json_values import compact
from reversi.core.models import StepStatus, check_run_id
from reversi.core.times import parse_since
from reversi.engine import approvals, jobs, keys
from reversi.engine.halts import halt_tenant
from reversi.engine.keys import Role
from reversi.engine.paging import RunQuery, list_runs_page
from reversi.errors import BadInput, Forbidden, NoCompensator, NotFound
from reversi.server import bodies
from reversi.server.auth import Access, check_run, in_reach, run_tenant
from reversi.server.endpoint import Call, Endpoint, Param, offset_page, page, reply

NDJSON = "application/x-ndjson"


# -- runs and recording ---------------------------------------------------------------------------


def open_run(call: Call) -> Response:
    body = call.body(bodies.OpenRun)
    run_id = call.headers.get("reversi-run-id")
    existing = None
    if run_id is not None:
        try:
            existing = call.server.run_record(check_run_id(run_id))
        except NotFound:
            existing = None
        if existing is not None:
            check_run(call.principal, existing, Access.RECORD)
    run = call.ledger.start_run(
        run_id,
        actor=body.scope.actor,
        tenant=run_tenant(call.principal, body.scope.tenant),
        environment=body.scope.environment,
        mode=body.mode,
        labels=body.labels,
    )
    return reply(run.snapshot().to_dict(), 200 if existing else 201)


def list_runs(call: Call) -> Response:
    p, tenant = call.principal, call.query.get("tenant")
    if p.tenant is not None:
        if tenant is not None and tenant != p.tenant:
            return page([], None)
        tenant = p.tenant
    since = call.query.get("since")
    query = RunQuery(call.query.get("status"), call.query.get("actor"), tenant,
                     parse_since(since) if since is not None else None, None if p.is_operator else p.name)
    after = call.cursor()
    if after is not None and not (isinstance(after, list) and len(after) == 2
                                  and all(isinstance(a, str) for a in after)):
        raise BadInput("bad cursor: pass the `next` of the previous page as it was")
    found = list_runs_page(call.ledger.store, query, after=tuple(after) if after else None, limit=call.limit())
    return page([s.to_dict() for s in found.items], list(found.next) if found.next else None)


def get_run(call: Call) -> Response:
    return reply(call.run(Access.READ).snapshot().to_dict())


async def record_step(call: Call) -> Response:
    run = await call.arecord(Access.RECORD)
    body = call.body(bodies.RecordStep)
    args = {} if body.args is None else body.args
    step = await call.write(call.server.ledger.recorder.begin_write(run, body.tool, args, body.depends_on))
    call.server.metrics.calls.inc()
    return reply({"step": step, "status": "intended"}, 201)


async def record_outcome(call: Call) -> Response:
    run = await call.arecord(Access.RECORD)
    body, step = call.body(bodies.Outcome), call.step
    write = call.server.ledger.recorder.outcome_write(
        run, step, StepStatus(body.status), result=body.result, error=body.error
    )
    return reply((await call.write(write)).to_dict())


def get_events(call: Call) -> Response:
    run, after = call.run(Access.READ), call.cursor()
    if after is not None and (not isinstance(after, int) or isinstance(after, bool)):
        raise BadInput("bad cursor: pass the `next` of the previous page as it was")
    events = [e for e in run.events() if after is None or e.seq > after]
    if NDJSON in call.headers.get("accept", ""):
        shown = events[: call.limit()] if "limit" in call.query else events
        lines = "".join(compact(e.to_dict()) + "\n" for e in shown)
        return Response(lines, media_type=NDJSON)
    limit = call.limit()
    return page([e.to_dict() for e in events[:limit]], events[limit - 1].seq if len(events) > limit else None)


# -- operating on runs ----------------------------------------------------------------------------


def get_plan(call: Call) -> Response:
    return reply(call.run(Access.READ).plan().to_dict())


def start_rollback(call: Call) -> Response:
    run = call.run(Access.OPERATE)
    body = call.body(bodies.Rollback)
    if not body.confirm:
        return reply(run.plan().to_dict())
    if not call.server.compensator_cmd:
        raise NoCompensator()
    job = jobs.submit_rollback(call.ledger.store, run.id, actor=body.actor or call.principal.name,
                               approve_compensations=body.approve_compensations, attempts=body.retries)
    call.server.wake_worker()
    return reply(job.to_dict(), 202)


def rollback_progress(call: Call) -> Response:
    return reply(jobs.latest_job(call.ledger.store, call.run(Access.OPERATE).id).to_dict())


def resolve_step(call: Call) -> Response:
    run = call.run(Access.OPERATE)
    body, step = call.body(bodies.Resolve), call.step
    found = {"result": body.result} if "result" in body.model_fields_set else {}
    settled = run.resolve(step, body.status, note=body.note, actor=body.actor or call.principal.name, **found)
    return reply(settled.to_dict())


# -- approvals ------------------------------------------------------------------------------------


def list_approvals(call: Call) -> Response:
    found = call.ledger.approvals(call.query.get("status"), call.query.get("run_id"))
    if call.principal.tenant is not None:
        found = [a for a in found if in_reach(call.principal, call.server.run_record(a.run_id).scope.tenant)]
    return offset_page(call, [a.to_dict() for a in found])


def _approval_id(call: Call) -> str:
    approval_id = str(call.path["approval_id"])
    approval = approvals.get_approval(call.ledger.store, approval_id)
    if not in_reach(call.principal, call.server.run_record(approval.run_id).scope.tenant):
        raise Forbidden(f"{approval_id} belongs to another principal")
    return approval_id


def approve(call: Call) -> Response:
    approval_id, body = _approval_id(call), call.body(bodies.Approve)
    return reply(call.ledger.approve(approval_id, by=body.by or call.principal.name, note=body.note).to_dict())


def deny(call: Call) -> Response:
    approval_id, body = _approval_id(call), call.body(bodies.Deny)
    return reply(call.ledger.deny(approval_id, note=body.note, by=body.by or call.principal.name).to_dict())


# -- halts and keys (admin) -----------------------------------------------------------------------


def add_halt(call: Call) -> Response:
    body = call.body(bodies.AddHalt)
    s = body.scope
    tenant = halt_tenant(call.principal.tenant, s.tenant)
    halt = call.ledger.add_halt(body.reason, tool=s.tool, actor=s.actor, tenant=tenant, environment=s.environment,
                                by=call.principal.name)
    return reply(halt.to_dict(), 201)


def resume(call: Call) -> Response:
    body = call.body(bodies.Resume)
    lifted = call.ledger.lift_halts(body.halt_id, by=call.principal.name, tenant=call.principal.tenant)
    return reply({"lifted": lifted})


def list_halts(call: Call) -> Response:
    return offset_page(call, [h.to_dict() for h in call.ledger.halts(call.principal.tenant)])


def create_key(call: Call) -> Response:
    body = call.body(bodies.CreateKey)
    confined = call.principal.tenant
    if confined is not None and body.tenant != confined:
        raise Forbidden(f"a key confined to tenant {confined} can only create keys of tenant {confined}")
    row, key = keys.create_key(call.ledger.store, body.name, body.role, body.tenant)
    return reply({"id": row.key_id, "name": row.name, "role": row.role, "tenant": row.tenant, "key": key}, 201)


def list_keys(call: Call) -> Response:
    rows = [r for r in keys.list_keys(call.ledger.store) if in_reach(call.principal, r.tenant or "")]
    return offset_page(call, [r.to_dict() for r in rows])


def revoke_key(call: Call) -> Response:
    key_id = str(call.path["key_id"])
    if not any(r.key_id == key_id and in_reach(call.principal, r.tenant or "") for r in keys.list_keys(
            call.ledger.store)):
        raise NotFound(f"no key {key_id}")
    return reply(keys.revoke_key(call.ledger.store, key_id).to_dict())


# -- the route table ------------------------------------------------------------------------------

_PAGE = (Param("limit", "At most this many items (1-1000, default 100).", {"type": "integer"}),
         Param("cursor", "The `next` of the previous page."))
_RUNS = "/v1/runs/{run_id}"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/v1/runs", open_run, Role.AGENT,
             "Open a run; with the Reversi-Run-Id header, continue that run or create it under that id.",
             {201: "Run", 200: "Run"}, bodies.OpenRun),
    Endpoint("GET", "/v1/runs", list_runs, Role.AGENT,
             "List runs, newest first (an agent sees its own; a tenant's operator the tenant's).",
             {200: "RunList"}, query=(
                 Param("status", "Runs with a step in this status."), Param("actor", "Runs of this actor."),
                 Param("tenant", "Runs of this tenant."), Param("since", "Runs opened since (30m, 2h, 7d or a date)."),
                 *_PAGE)),
    Endpoint("GET", _RUNS, get_run, Role.AGENT, "One run with its steps.", {200: "Run"}),
    Endpoint("POST", f"{_RUNS}/steps", record_step, Role.AGENT,
             "Record an intended call; refusals answer 403 (halt, kill file, enforce mode, denied approval), "
             "409 (duplicate) or 202 (approval pending, with the approval).",
             {201: "StepIntended", 202: "ApprovalPending"}, bodies.RecordStep),
    Endpoint("POST", f"{_RUNS}/steps/{{step}}/outcome", record_outcome, Role.AGENT,
             "Record what the call did: succeeded with its result, failed or uncertain with an error.",
             {200: "Step"}, bodies.Outcome),
    Endpoint("GET", f"{_RUNS}/plan", get_plan, Role.AGENT, "The rollback plan (a dry run).", {200: "Plan"}),
    Endpoint("POST", f"{_RUNS}/rollback", start_rollback, Role.OPERATOR,
             "With confirm: true, start a rollback job (202); without, the plan (200).",
             {202: "Job", 200: "Plan"}, bodies.Rollback),
    Endpoint("GET", f"{_RUNS}/rollback", rollback_progress, Role.OPERATOR,
             "The run's latest rollback job: state, current step, the report so far.", {200: "Job"}),
    Endpoint("POST", f"{_RUNS}/steps/{{step}}/resolve", resolve_step, Role.OPERATOR,
             "Settle an unresolved step (status, note; result to let it be undone).", {200: "Step"}, bodies.Resolve),
    Endpoint("GET", f"{_RUNS}/events", get_events, Role.AGENT,
             "The run's journal in seq order (JSON lines with Accept: application/x-ndjson).",
             {200: "EventList"}, query=_PAGE, ndjson=True),
    Endpoint("GET", "/v1/approvals", list_approvals, Role.OPERATOR, "Approvals, pending first.",
             {200: "ApprovalList"}, query=(Param("status", "pending, approved or denied."),
                                           Param("run_id", "Approvals of this run."), *_PAGE)),
    Endpoint("POST", "/v1/approvals/{approval_id}/approve", approve, Role.OPERATOR, "Approve.",
             {200: "Approval"}, bodies.Approve),
    Endpoint("POST", "/v1/approvals/{approval_id}/deny", deny, Role.OPERATOR, "Deny (a note is required).",
             {200: "Approval"}, bodies.Deny),
    Endpoint("POST", "/v1/halt", add_halt, Role.ADMIN, "Stop new calls that match a scope (all when it is empty).",
             {201: "Halt"}, bodies.AddHalt),
    Endpoint("POST", "/v1/resume", resume, Role.ADMIN, "Lift one halt (halt_id), or all of them ({}).",
             {200: "Lifted"}, bodies.Resume),
    Endpoint("GET", "/v1/halts", list_halts, Role.ADMIN, "The active halts.", {200: "HaltList"}, query=_PAGE),
    Endpoint("POST", "/v1/keys", create_key, Role.ADMIN, "Create an API key; the key is in this answer only.",
             {201: "NewKey"}, bodies.CreateKey),
    Endpoint("GET", "/v1/keys", list_keys, Role.ADMIN, "API keys (never their secrets).", {200: "KeyList"},
             query=_PAGE),
    Endpoint("DELETE", "/v1/keys/{key_id}", revoke_key, Role.ADMIN, "Revoke a key at once.", {200: "Key"}),
)

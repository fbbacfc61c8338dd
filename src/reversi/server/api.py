"""The JSON endpoints under /v1: each parses its input, makes one engine call and answers with JSON.

`ENDPOINTS` is the route table: the app, the OpenAPI document and the tests all read it.
"""

from __future__ import annotations

from starlette.responses import Response

from reversi.core import redaction
from reversi.core.json_values import compact
from reversi.core.models import StepStatus
from reversi.core.scopes import Selection
from reversi.core.times import parse_duration, parse_since
from reversi.engine import tracing
from reversi.engine.access import Access
from reversi.engine.approvals import approval_page_key
from reversi.engine.capture import Captured
from reversi.engine.commands import command_read_back
from reversi.engine.keys import Role
from reversi.errors import BadInput, NoReader
from reversi.server import bodies
from reversi.server.endpoint import Call, Endpoint, Param, Runs, is_whole_number, offset_page, page, reply

NDJSON = "application/x-ndjson"


# -- runs and recording ---------------------------------------------------------------------------


def open_run(call: Call) -> Response:
    body = call.body(bodies.OpenRun)
    run, existed = call.ledger.open_run(call.headers.get("reversi-run-id"), actor=body.scope.actor,
                                        tenant=body.scope.tenant, environment=body.scope.environment,
                                        mode=body.mode, labels=body.labels)
    return reply(call.ledger.snapshot(run.id).to_dict(), 200 if existed else 201)


def list_runs(call: Call) -> Response:
    if "expiring" in call.query:
        return _closing_runs(call, call.query["expiring"])
    since = call.query.get("since")
    found = call.ledger.list_runs(status=call.query.get("status"), actor=call.query.get("actor"),
                                  tenant=call.query.get("tenant"),
                                  since=parse_since(since) if since is not None else None,
                                  after=call.cursor_of((str, str)), limit=call.limit())
    return page([s.to_dict() for s in found.items], list(found.next) if found.next else None)


def _closing_runs(call: Call, within: str) -> Response:
    """The runs with a standing step whose undo window closes within `within`, the soonest first, each
    with those steps (`closing`); `partial` when only the newest runs with standing steps were looked at."""
    span = parse_duration(within, what="expiring")
    other = next((name for name in ("status", "actor", "since") if name in call.query), None)
    if other is not None:
        raise BadInput(f"expiring takes no {other} filter: it looks at every run with a standing step "
                       "(tenant, limit and cursor apply)")
    found, partial = call.ledger.closing_runs(span, tenant=call.query.get("tenant"))
    items = [summary.to_dict() | {"closing": [c.to_dict() for c in steps]} for summary, steps in found]
    return offset_page(call, items, partial=partial)


def get_run(call: Call) -> Response:
    shown = call.ledger.snapshot(call.run_id).to_dict()
    return reply(shown | {"where_it_stands": call.ledger.standing(call.run_id).to_dict()})


async def record_step(call: Call) -> Response:
    await call.ledger.arun_record(call.run_id, Access.RECORD)  # before the body: an intruder learns nothing
    body = call.body(bodies.RecordStep)
    args = {} if body.args is None else body.args
    with tracing.remote_parent(call.headers.get("traceparent")):  # the client's trace id, journaled
        before = Captured.supplied(body.before) if "before" in body.model_fields_set else None
        step = await call.recording(call.ledger.abegin(call.run_id, body.tool, args, body.depends_on, before=before,
                                                       call_id=body.call_id))
    call.server.metrics.calls.inc()
    return reply({"step": step, "status": "intended"}, 201)


async def record_outcome(call: Call) -> Response:
    await call.ledger.arun_record(call.run_id, Access.RECORD)
    body, step = call.body(bodies.ReportOutcome), call.step
    state = await call.recording(call.ledger.aoutcome(call.run_id, step, StepStatus(body.status), result=body.result,
                                                      error=body.error))
    return reply(state.to_dict())


def get_events(call: Call) -> Response:
    run_id, after = call.run_id, call.cursor()
    if after is not None and (not isinstance(after, int) or isinstance(after, bool)):
        raise BadInput("bad cursor: pass the `next` of the previous page as it was")
    if NDJSON in call.headers.get("accept", ""):
        shown = call.ledger.events(run_id, after=after, limit=call.limit() if "limit" in call.query else None)
        lines = "".join(compact(e.to_dict()) + "\n" for e in shown)
        return Response(lines, media_type=NDJSON)
    limit = call.limit()
    events = call.ledger.events(run_id, after=after, limit=limit + 1)
    return page([e.to_dict() for e in events[:limit]], events[limit - 1].seq if len(events) > limit else None)


# -- operating on runs ----------------------------------------------------------------------------


def _after_step(call: Call) -> int | None:
    text = call.query.get("after_step")
    if text is None:
        return None
    if text != "-1" and (not is_whole_number(text) or len(text) > 9):
        raise BadInput(f"after_step {text[:40]!r}: expected a step number (a whole number from -1)")
    return int(text)


def get_plan(call: Call) -> Response:
    return reply(call.ledger.plan(call.run_id, to=call.query.get("to"), after_step=_after_step(call)).to_dict())


def start_rollback(call: Call) -> Response:
    run = call.ledger.get_run(call.run_id, Access.OPERATE)
    body = call.body(bodies.Rollback)
    if not body.confirm:
        return reply(call.ledger.plan(run.id, to=body.to, after_step=body.after_step).to_dict())
    job = call.ledger.submit_rollback(run.id, has_compensator=bool(call.server.compensator_cmd), actor=body.actor,
                                      approve_compensations=body.approve_compensations, attempts=body.attempts,
                                      to=body.to, after_step=body.after_step, concurrency=body.concurrency)
    call.server.wake_worker()
    return reply(job.to_dict(), 202)


def _selection(body: bodies.ScopeOfRuns) -> Selection:
    return Selection.typed(actor=body.actor, key=body.key, tenant=body.tenant, labels=body.labels, tool=body.tool,
                           since=body.since, until=body.until)


def plan_scope(call: Call) -> Response:
    return reply(call.ledger.plan_scope(_selection(call.body(bodies.ScopeOfRuns))).to_dict())


def start_scope_rollback(call: Call) -> Response:
    body = call.body(bodies.ScopeRollback)
    selection = _selection(body)
    if not body.confirm:
        if body.contain:
            raise BadInput("contain stops new calls: give it with confirm: true")
        return reply(call.ledger.plan_scope(selection).to_dict())
    if body.reason is not None and not body.contain:
        raise BadInput("reason is the halt's reason: give it with contain: true")
    job = call.ledger.submit_scope_rollback(selection, has_compensator=bool(call.server.compensator_cmd),
                                            actor=body.actor_name, contain=body.contain,
                                            reason=body.reason, approve_compensations=body.approve_compensations,
                                            attempts=body.attempts, concurrency=body.concurrency)
    call.server.wake_worker()
    return reply(job.to_dict(), 202)


def scope_rollback_progress(call: Call) -> Response:
    return reply(call.ledger.scope_job(call.path["job_id"]).to_dict())


def add_checkpoint(call: Call) -> Response:
    call.ledger.run_record(call.run_id, Access.RECORD)  # before the body: an intruder learns nothing
    body = call.body(bodies.NewCheckpoint)
    return reply(call.ledger.checkpoint(call.run_id, body.name).to_dict(), 201)


def list_checkpoints(call: Call) -> Response:
    return offset_page(call, [c.to_dict() for c in call.ledger.checkpoints(call.run_id)])


def rollback_progress(call: Call) -> Response:
    return reply(redaction.report(call.ledger.masker(), call.ledger.latest_job(call.run_id).to_dict()))


def resolve_step(call: Call) -> Response:
    run_id = call.ledger.run_record(call.run_id, Access.OPERATE).run_id
    body, step = call.body(bodies.Resolve), call.step
    found = {"result": body.result} if "result" in body.model_fields_set else {}
    return reply(call.ledger.resolve(run_id, step, body.status, note=body.note, actor=body.actor, **found).to_dict())


def reconcile(call: Call) -> Response:
    run_id = call.ledger.run_record(call.run_id, Access.OPERATE).run_id
    if not call.server.reader_cmd:
        raise NoReader()
    found = call.ledger.reconcile_by_probes(run_id, command_read_back(call.server.reader_cmd), masked=True)
    shown = [probed.to_dict() for probed in found]
    return reply({"run_id": run_id, "steps": shown, "settled": all(s["outcome"] != "unresolved" for s in shown)})


def list_follow_ups(call: Call) -> Response:
    return page([f.to_dict() for f in call.ledger.follow_ups(call.run_id, masked=True)], None)


def close_follow_up(call: Call) -> Response:
    run_id = call.ledger.run_record(call.run_id, Access.OPERATE).run_id
    body = call.body(bodies.CloseFollowUp)
    call.ledger.close_follow_up(run_id, call.step, body.note, actor=body.actor)
    return reply(next(f for f in call.ledger.follow_ups(run_id, masked=True) if f.step == call.step).to_dict())


# -- approvals ------------------------------------------------------------------------------------


def list_approvals(call: Call) -> Response:
    after, limit = call.cursor_of((int, str, str)), call.limit()
    found = call.ledger.approvals(call.query.get("status"), call.query.get("run_id"), after=after, limit=limit + 1)
    more = len(found) > limit
    return page([a.to_dict() for a in found[:limit]], list(approval_page_key(found[limit - 1])) if more else None)


def _approval_id(call: Call) -> str:
    return str(call.path["approval_id"])


def approve(call: Call) -> Response:
    approval_id = _approval_id(call)
    call.ledger.approval_to_decide(approval_id)  # before the body, as for runs
    body = call.body(bodies.Approve)
    return reply(call.ledger.approve(approval_id, by=body.by, note=body.note).to_dict())


def deny(call: Call) -> Response:
    approval_id = _approval_id(call)
    call.ledger.approval_to_decide(approval_id)
    body = call.body(bodies.Deny)
    return reply(call.ledger.deny(approval_id, note=body.note, by=body.by).to_dict())


# -- halts and keys (admin) -----------------------------------------------------------------------


def add_halt(call: Call) -> Response:
    body = call.body(bodies.AddHalt)
    s = body.scope
    halt = call.ledger.add_halt(body.reason, tool=s.tool, actor=s.actor, tenant=s.tenant, environment=s.environment)
    return reply(halt.to_dict(), 201)


def resume(call: Call) -> Response:
    return reply({"lifted": call.ledger.lift_halts(call.body(bodies.Resume).halt_id)})


def erase(call: Call) -> Response:
    body = call.body(bodies.Erase)
    if not body.confirm:
        raise BadInput('erasing cannot be undone: send "confirm": true to erase')
    done = call.ledger.erase_values(tenant=body.tenant, actor=body.actor, run_id=body.run_id, by=body.actor_name)
    return reply(done.to_dict())


def list_halts(call: Call) -> Response:
    return offset_page(call, [h.to_dict() for h in call.ledger.halts()])


def create_key(call: Call) -> Response:
    body = call.body(bodies.CreateKey)
    row, key = call.ledger.create_key(body.name, body.role, body.tenant)
    return reply({"id": row.key_id, "name": row.name, "role": row.role, "tenant": row.tenant, "key": key}, 201)


def list_keys(call: Call) -> Response:
    return offset_page(call, [r.to_dict() for r in call.ledger.list_keys()])


def revoke_key(call: Call) -> Response:
    return reply(call.ledger.revoke_key(str(call.path["key_id"])).to_dict())


# -- the route table ------------------------------------------------------------------------------

_PAGE = (Param("limit", "At most this many items (1-1000, default 100).", {"type": "integer"}),
         Param("cursor", "The `next` of the previous page."))
_RUNS = "/v1/runs/{run_id}"
_SCOPE = (Param("to", "Only the steps after this checkpoint (earlier steps are kept)."),
          Param("after_step", "Only the steps after this step number (-1: every step); not with `to`.",
                {"type": "integer"}))

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/v1/runs", open_run, Role.AGENT,
             "Open a run; with the Reversi-Run-Id header, continue that run or create it under that id.",
             {201: "Run", 200: "Run"}, bodies.OpenRun, runs=Runs.THREAD),
    Endpoint("GET", "/v1/runs", list_runs, Role.AGENT,
             "List runs, newest first (an agent sees its own; a tenant's operator the tenant's).",
             {200: "RunList"}, query=(
                 Param("status", "Runs with a step in this status."), Param("actor", "Runs of this actor."),
                 Param("tenant", "Runs of this tenant."), Param("since", "Runs opened since (30m, 2h, 7d or a date)."),
                 Param("expiring", "Instead: the runs with a standing step whose undo window closes within this "
                       "(24h, 7d), the soonest first, each with those steps (`closing`); with tenant, limit "
                       "and cursor only."),
                 *_PAGE), runs=Runs.THREAD),
    Endpoint("GET", _RUNS, get_run, Role.AGENT, "One run with its steps.", {200: "Run"}, runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/steps", record_step, Role.AGENT,
             "Record an intended call; refusals answer 403 (halt, kill file, enforce mode, denied approval), "
             "409 (duplicate) or 202 (approval pending, with the approval).",
             {201: "StepIntended", 202: "ApprovalPending"}, bodies.RecordStep, runs=Runs.LOOP),
    Endpoint("POST", f"{_RUNS}/steps/{{step}}/outcome", record_outcome, Role.AGENT,
             "Record what the call did: succeeded with its result, failed or uncertain with an error.",
             {200: "Step"}, bodies.ReportOutcome, runs=Runs.LOOP),
    Endpoint("GET", f"{_RUNS}/plan", get_plan, Role.AGENT, "The rollback plan (a dry run).", {200: "Plan"},
             query=_SCOPE, runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/checkpoints", add_checkpoint, Role.AGENT,
             "Mark a checkpoint after the run's last step (the run's owner), to roll back to later.",
             {201: "Checkpoint"}, bodies.NewCheckpoint, runs=Runs.THREAD),
    Endpoint("GET", f"{_RUNS}/checkpoints", list_checkpoints, Role.AGENT, "The run's checkpoints, oldest first.",
             {200: "CheckpointList"}, query=_PAGE, runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/rollback", start_rollback, Role.OPERATOR,
             "With confirm: true, start a rollback job (202); without, the plan (200).",
             {202: "Job", 200: "Plan"}, bodies.Rollback, runs=Runs.THREAD),
    Endpoint("GET", f"{_RUNS}/rollback", rollback_progress, Role.OPERATOR,
             "The run's latest rollback job: state, current step, the report so far.", {200: "Job"}, runs=Runs.THREAD),
    Endpoint("POST", "/v1/scopes/plan", plan_scope, Role.OPERATOR,
             "The plan of rolling back many runs: those of an actor, key, tenant or labels, the steps of a tool "
             "glob or time window; one walk, newest first across runs.", {200: "ScopePlan"}, bodies.ScopeOfRuns,
             runs=Runs.THREAD),
    Endpoint("POST", "/v1/scopes/rollback", start_scope_rollback, Role.OPERATOR,
             "With confirm: true, start a rollback job of many runs (202; contain, an admin's, halts the scope "
             "and revokes the key first); without, the plan (200).", {202: "ScopeJob", 200: "ScopePlan"},
             bodies.ScopeRollback, runs=Runs.THREAD),
    Endpoint("GET", "/v1/scopes/rollback/{job_id}", scope_rollback_progress, Role.OPERATOR,
             "A rollback job of many runs: state, what was contained, the report when done.", {200: "ScopeJob"},
             runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/steps/{{step}}/resolve", resolve_step, Role.OPERATOR,
             "Settle an unresolved step (status, note; result to let it be undone).", {200: "Step"}, bodies.Resolve,
             runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/reconcile", reconcile, Role.OPERATOR,
             "Settle the run's intended and uncertain steps from what their manifests' probes read (with the "
             "server's reader); a step no probe can tell about stays unresolved.", {200: "Reconciled"},
             runs=Runs.THREAD),
    Endpoint("GET", f"{_RUNS}/follow-ups", list_follow_ups, Role.OPERATOR,
             "The follow-ups rollbacks opened for the steps they left in the world, in the order opened.",
             {200: "FollowUpList"}, runs=Runs.THREAD),
    Endpoint("POST", f"{_RUNS}/steps/{{step}}/follow-up/close", close_follow_up, Role.OPERATOR,
             "Close a step's follow-up, saying what was done (note).", {200: "FollowUp"}, bodies.CloseFollowUp,
             runs=Runs.THREAD),
    Endpoint("GET", f"{_RUNS}/events", get_events, Role.AGENT,
             "The run's journal in seq order (JSON lines with Accept: application/x-ndjson).",
             {200: "EventList"}, query=_PAGE, ndjson=True, runs=Runs.THREAD),
    Endpoint("GET", "/v1/approvals", list_approvals, Role.OPERATOR, "Approvals, pending first.",
             {200: "ApprovalList"}, query=(Param("status", "pending, approved or denied."),
                                           Param("run_id", "Approvals of this run."), *_PAGE), runs=Runs.THREAD),
    Endpoint("POST", "/v1/approvals/{approval_id}/approve", approve, Role.OPERATOR, "Approve.",
             {200: "Approval"}, bodies.Approve, runs=Runs.THREAD),
    Endpoint("POST", "/v1/approvals/{approval_id}/deny", deny, Role.OPERATOR, "Deny (a note is required).",
             {200: "Approval"}, bodies.Deny, runs=Runs.THREAD),
    Endpoint("POST", "/v1/halt", add_halt, Role.ADMIN, "Stop new calls that match a scope (all when it is empty).",
             {201: "Halt"}, bodies.AddHalt, runs=Runs.THREAD),
    Endpoint("POST", "/v1/resume", resume, Role.ADMIN, "Lift one halt (halt_id), or all of them ({}).",
             {200: "Lifted"}, bodies.Resume, runs=Runs.THREAD),
    Endpoint("GET", "/v1/halts", list_halts, Role.ADMIN, "The active halts.", {200: "HaltList"}, query=_PAGE,
             runs=Runs.THREAD),
    Endpoint("POST", "/v1/erase", erase, Role.ADMIN,
             "Erase the values of a tenant's, an actor's or one run's runs (their data keys destroyed).",
             {200: "Erasure"}, bodies.Erase, runs=Runs.THREAD),
    Endpoint("POST", "/v1/keys", create_key, Role.ADMIN, "Create an API key; the key is in this answer only.",
             {201: "NewKey"}, bodies.CreateKey, runs=Runs.THREAD),
    Endpoint("GET", "/v1/keys", list_keys, Role.ADMIN, "API keys (never their secrets).", {200: "KeyList"},
             query=_PAGE, runs=Runs.THREAD),
    Endpoint("DELETE", "/v1/keys/{key_id}", revoke_key, Role.ADMIN, "Revoke a key at once.", {200: "Key"},
             runs=Runs.THREAD),
)

"""The OpenAPI document at /openapi.json, built from the route table so it cannot drift from it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from reversi.core.json_values import LooseJSONObject
from reversi.core.manifest import CompensationKind
from reversi.core.models import ApprovalKind, ApprovalStatus, EventType, Mode, StepStatus
from reversi.core.plan import ActionKind
from reversi.engine.jobs import JobState
from reversi.engine.keys import Role
from reversi.server.bodies import Body
from reversi.server.endpoint import Endpoint

# The document is built by nesting dicts and filling them in place, so its parts are LooseJSONObject:
# exact types would take a narrowing of each nested dict before it is filled.
_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_ANY: LooseJSONObject = {}


def _nullable(schema: LooseJSONObject) -> LooseJSONObject:
    return {"anyOf": [schema, {"type": "null"}]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: LooseJSONObject, optional: LooseJSONObject | None = None) -> LooseJSONObject:
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


def _enum(kind: type[StrEnum], values: Iterable[StrEnum] | None = None) -> LooseJSONObject:
    """A string schema whose values are the enum's (or those of `values`), so the document follows the code."""
    return {"type": "string", "enum": [v.value for v in (values if values is not None else kind)]}


def _list_of(name: str) -> LooseJSONObject:
    return _object({"items": {"type": "array", "items": _ref(name)}, "next": _nullable(_STR)})


_STEP_STATUS = _enum(StepStatus)
_ERROR_DETAIL = _object({"code": _STR, "message": _STR})
_STEPS = {"type": "array", "items": _INT}
_RUN_STEPS = {"type": "array", "items": _object({"run": _STR, "step": _INT})}
_OTHER_RUNS = {"type": "array", "items": _object({"run": _STR, "step": _INT, "resource": _STR})}
_SUMMARY = {"run_id": _STR, "principal": _STR, "mode": _enum(Mode),
            "actor": _STR, "tenant": _STR, "environment": _STR, "created_at": _STR, "standing": _INT,
            "unresolved": _INT}

SCHEMAS: LooseJSONObject = {
    "Error": _object({"error": _ERROR_DETAIL}),
    "ApprovalPending": _object({"error": _ERROR_DETAIL, "approval": _ref("Approval")}),
    "Step": _object({"step": _INT, "tool": _STR, "args": _ANY, "depends_on": _STEPS, "status": _STEP_STATUS,
                     "result": _ANY, "error": _nullable(_STR)}),
    "StepIntended": _object({"step": _INT, "status": _enum(StepStatus, [StepStatus.INTENDED])}),
    "Run": _object({**_SUMMARY, "steps": {"type": "array", "items": _ref("Step")}, "steps_count": _INT,
                    "labels": {"type": "object", "additionalProperties": _STR}},
                   {"where_it_stands": _object({"steps": {"type": "array"}, "next": {"type": "array"}})}),
    "RunSummary": _object({**_SUMMARY, "steps": _INT}, {"closing": {"type": "array", "items": _ref("Closing")}}),
    "Closing": _object({"run_id": _STR, "step": _INT, "tool": _STR, "closes": _STR, "left": _STR}),
    "RunList": _object({"items": {"type": "array", "items": _ref("RunSummary")}, "next": _nullable(_STR)},
                       {"partial": _BOOL}),  # with `expiring`: only the newest runs with standing steps were read
    "Action": _object(
        {"step": _INT, "tool": _STR,
         "kind": _enum(ActionKind)},
        {"reason": _nullable(_STR), "compensation_tool": _STR, "args": _ANY, "idempotency_key": _STR,
         "needs_approval": _BOOL, "residue": {"type": "array", "items": _STR},
         "compensation_kind": _enum(CompensationKind), "verified": _BOOL, "blocked_by": _STEPS,
         "blocked_by_runs": _OTHER_RUNS, "last_failure": _STR, "alternative": _STR, "chosen_because": _STR,
         "declared_by": _STR,
         "then": {"type": "array", "items": _object({"tool": _STR, "args": _ANY})}}),
    "Plan": _object({"run_id": _STR, "actions": {"type": "array", "items": _ref("Action")},
                     "fully_reversible": _BOOL, "notes": {"type": "array", "items": _STR}},
                    {"scope": _ref("Scope")}),
    "Scope": _object({"after_step": _INT, "checkpoint": _nullable(_STR)},
                     {"tool": _STR, "since": _STR, "until": _STR}),
    "Selection": _object({}, {"actor": _STR, "key": _STR, "tenant": _STR, "tool": _STR, "since": _STR,
                              "until": _STR, "labels": {"type": "object", "additionalProperties": _STR}}),
    "ScopePlan": _object({"scope": _ref("Selection"), "runs": {"type": "array", "items": _STR},
                          "actions": {"type": "array", "items": _ref("Action")}, "fully_reversible": _BOOL,
                          "notes": {"type": "array", "items": _STR}}),
    "ScopeReport": _object({"scope": _ref("Selection"), "runs": {"type": "array", "items": _STR},
                            "compensated": _RUN_STEPS, "skipped": _RUN_STEPS, "already_undone": _RUN_STEPS,
                            "failed": {"type": "array"}, "unrecoverable": {"type": "array"},
                            "deferred": {"type": "array"}, "awaiting_approval": {"type": "array"},
                            "complete": _BOOL, "reports": {"type": "object", "additionalProperties": _ref("Report")}},
                           {"unresolved": _RUN_STEPS, "unmanifested": _RUN_STEPS, "unverified": _RUN_STEPS,
                            "contained": {"type": "array", "items": _STR},
                            "in_progress": {"type": "array", "items": _STR}}),
    "ScopeJob": _object({"job_id": _STR, "scope": _ref("Selection"), "state": _enum(JobState),
                         "report": _nullable(_ref("ScopeReport")), "error": _nullable(_ERROR_DETAIL),
                         "contained": {"type": "array", "items": _STR}, "actor": _STR, "principal": _STR,
                         "concurrency": _INT, "created_at": _STR, "started_at": _nullable(_STR),
                         "finished_at": _nullable(_STR)}),
    "Checkpoint": _object({"name": _STR, "after_step": _INT, "at": _STR}),
    "CheckpointList": _list_of("Checkpoint"),
    "Report": _object({
        "run_id": _STR, "compensated": _STEPS, "skipped": _STEPS, "unresolved": _STEPS, "unmanifested": _STEPS,
        "unverified": _STEPS,
        "failed": {"type": "array", "items": _object({"step": _INT, "error": _STR, "attempts": _INT})},
        "unrecoverable": {"type": "array", "items": _object({"step": _INT, "reason": _STR})},
        "deferred": {"type": "array", "items": _object({"step": _INT, "blocked_by": _STEPS},
                                                       {"blocked_by_runs": _OTHER_RUNS})},
        "awaiting_approval": {"type": "array",
                              "items": _object({"step": _INT, "approval_id": _STR, "status": _STR})},
        "complete": _BOOL}, {"scope": _ref("Scope"), "already_undone": _STEPS,
                             "follow_ups": {"type": "array", "items": _ref("FollowUp")}, "settled": _BOOL}),
    "FollowUp": _object({"follow_up_id": _STR, "run_id": _STR, "step": _INT,
                         "status": {"type": "string", "enum": ["open", "closed"]}, "title": _STR, "text": _STR,
                         "owner": _STR, "why": _STR, "opened_at": _STR, "opened_by": _STR},
                        {"action": _object({"tool": _STR, "args": _ANY}), "closed_at": _STR, "closed_by": _STR,
                         "note": _STR}),
    "FollowUpList": _list_of("FollowUp"),
    "Reconciled": _object({"run_id": _STR, "settled": _BOOL, "steps": {"type": "array", "items": _object(
        {"step": _INT, "tool": _STR, "outcome": _STR, "why": _STR})}}),
    "Job": _object({"job_id": _STR, "run_id": _STR, "state": _enum(JobState),
                    "current_step": _nullable(_INT), "current_steps": {"type": "array", "items": _INT},
                    "concurrency": _INT, "report": _nullable(_ref("Report")),
                    "error": _nullable(_ERROR_DETAIL), "actor": _STR, "principal": _nullable(_STR),
                    "created_at": _STR, "started_at": _nullable(_STR), "finished_at": _nullable(_STR)},
                   {"scope": _ref("Scope")}),
    "Event": _object({"run_id": _STR, "seq": _INT, "step": _nullable(_INT), "type": _enum(EventType), "at": _STR,
                      "actor": _STR, "data": {"type": "object"}}),
    "EventList": _list_of("Event"),
    "Approval": _object({"approval_id": _STR, "run_id": _STR, "step": _nullable(_INT),
                         "kind": _enum(ApprovalKind), "tool": _STR, "args": _ANY,
                         "status": _enum(ApprovalStatus),
                         "requested_by": _STR, "requested_at": _STR, "decided_by": _nullable(_STR),
                         "decided_at": _nullable(_STR), "note": _nullable(_STR), "used": _BOOL,
                         "decided_principal": _nullable(_STR)}),
    "ApprovalList": _list_of("Approval"),
    "Halt": _object({"halt_id": _STR, "reason": _STR,
                     "scope": {"type": "object", "additionalProperties": _STR}, "by": _STR, "created_at": _STR}),
    "HaltList": _list_of("Halt"),
    "Erasure": _object({"scope": _STR, "erased": {"type": "array", "items": _STR},
                        "already_erased": {"type": "array", "items": _STR},
                        "in_clear": {"type": "array", "items": _STR}}),
    "Lifted": _object({"lifted": _INT}),
    "NewKey": _object({"id": _STR, "name": _STR, "role": _enum(Role), "tenant": _nullable(_STR), "key": _STR}),
    "Key": _object({"id": _STR, "name": _STR, "role": _enum(Role), "tenant": _nullable(_STR), "created_at": _STR,
                    "revoked_at": _nullable(_STR), "created_by": _nullable(_STR), "revoked_by": _nullable(_STR)}),
    "KeyList": _list_of("Key"),
    "Health": _object({"status": _STR}),
}

_ERRORS = {400: "bad input", 401: "no valid API key", 403: "not allowed, or the call was refused",
           404: "not found", 409: "conflicts with the state of the run", 413: "body larger than 1 MiB",
           503: "the store is unavailable"}


def _json(schema: LooseJSONObject) -> LooseJSONObject:
    return {"application/json": {"schema": schema}}


_RUN = "$response.body#/run_id"
_SAME_RUN = "$request.path.run_id"


def _run_links(run: str) -> LooseJSONObject:
    """What a client does next with a run it has (its id taken from `run`)."""
    return {"GetRun": _link("get_run", run_id=run), "RecordStep": _link("record_step", run_id=run),
            "GetEvents": _link("get_events", run_id=run), "GetPlan": _link("get_plan", run_id=run),
            "StartRollback": _link("start_rollback", run_id=run), "AddCheckpoint": _link("add_checkpoint", run_id=run)}


def _link(operation: str, body: dict[str, str] | None = None, **parameters: str) -> LooseJSONObject:
    link: LooseJSONObject = {"operationId": operation, "parameters": parameters}
    if body is not None:
        link["requestBody"] = body
    return link


# How one answer leads to the next request (OpenAPI links), keyed by the answering operation and
# status: a run opened, a step recorded, its outcome, a checkpoint, the plan, the rollback and its
# progress; an approval asked for and decided; a key made and revoked; a halt and its lifting.
LINKS: dict[tuple[str, int], LooseJSONObject] = {
    ("open_run", 201): _run_links(_RUN),
    ("open_run", 200): _run_links(_RUN),
    ("get_run", 200): _run_links(_RUN),
    ("record_step", 201): {
        "RecordOutcome": _link("record_outcome", run_id=_SAME_RUN, step="$response.body#/step"),
        "ResolveStep": _link("resolve_step", run_id=_SAME_RUN, step="$response.body#/step"),
        **_run_links(_SAME_RUN)},
    ("record_step", 202): {
        "Approve": _link("approve", approval_id="$response.body#/approval/approval_id"),
        "Deny": _link("deny", approval_id="$response.body#/approval/approval_id")},
    ("record_outcome", 200): _run_links(_SAME_RUN),
    ("resolve_step", 200): _run_links(_SAME_RUN),
    ("get_plan", 200): {"StartRollback": _link("start_rollback", run_id=_SAME_RUN)},
    ("start_rollback", 202): {"RollbackProgress": _link("rollback_progress", run_id=_SAME_RUN)},
    ("add_checkpoint", 201): {"PlanAfterIt": _link("get_plan", run_id=_SAME_RUN, to="$response.body#/name"),
                              "ListCheckpoints": _link("list_checkpoints", run_id=_SAME_RUN)},
    ("create_key", 201): {"RevokeKey": _link("revoke_key", key_id="$response.body#/id")},
    ("add_halt", 201): {"Resume": _link("resume", {"halt_id": "$response.body#/halt_id"})},
}


def _error_statuses(ep: Endpoint) -> list[int]:
    statuses = [400, 401, 403, 503]
    if "{" in ep.path:
        statuses.append(404)
    if ep.method != "GET":
        statuses += [404, 409]
    if ep.body is not None:
        statuses.append(413)
    return sorted(set(statuses))


def _operation(ep: Endpoint, schemas: LooseJSONObject) -> LooseJSONObject:
    responses: LooseJSONObject = {}
    for status, name in ep.ok.items():
        content = _json(_ref(name))
        if ep.ndjson:
            content["application/x-ndjson"] = {"schema": _STR}
        responses[str(status)] = {"description": name, "content": content}
        links = LINKS.get((ep.handler.__name__, status))
        if links:
            responses[str(status)]["links"] = links
    for status in _error_statuses(ep):
        responses[str(status)] = {"description": _ERRORS[status], "content": _json(_ref("Error"))}
    op: LooseJSONObject = {"summary": ep.summary, "operationId": ep.handler.__name__, "responses": responses,
                          "x-reversi-role": ep.role.value}
    params = [{"name": name, "in": "path", "required": True, "schema": _STR}
              for name in re.findall(r"{(\w+)}", ep.path)]
    params += [{"name": p.name, "in": "query", "required": False, "description": p.description, "schema": p.schema}
               for p in ep.query]
    if ep.path == "/v1/runs" and ep.method == "POST":
        params.append({"name": "Reversi-Run-Id", "in": "header", "required": False, "schema": _STR,
                       "description": "Continue this run (yours), or create it under this id."})
    if params:
        op["parameters"] = params
    if ep.body is not None:
        op["requestBody"] = {"required": False, "content": _json(_body_schema(ep.body, schemas))}
    return op


def _body_schema(model: type[Body], schemas: LooseJSONObject) -> LooseJSONObject:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schema.pop("$defs", {}))
    schemas[model.__name__] = schema
    return _ref(model.__name__)


def _plain(summary: str, content: LooseJSONObject) -> LooseJSONObject:
    return {"get": {"summary": summary, "security": [], "responses": {"200": {"description": "ok",
                                                                             "content": content}}}}


def openapi_document(endpoints: tuple[Endpoint, ...]) -> LooseJSONObject:
    schemas = dict(SCHEMAS)
    paths: LooseJSONObject = {
        "/healthz": _plain("Liveness.", _json(_ref("Health"))),
        "/metrics": _plain("Prometheus metrics.", {"text/plain": {"schema": _STR}}),
    }
    for ep in endpoints:
        paths.setdefault(ep.path, {})[ep.method.lower()] = _operation(ep, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Reversi", "version": "1", "description": "Journal an agent's side-effecting calls; "
                 "plan and roll back its runs. Errors are {\"error\": {\"code\", \"message\"}}."},
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }

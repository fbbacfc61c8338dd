"""The operator's side: MCP tools that plan, roll back, resolve, reconcile, list runs and follow-ups, close
follow-ups and halt, through the engine.

Compensations and declared read-backs are called on the upstreams through `undo_calls.UndoCalls`,
each compensation with its idempotency key in the call's `_meta` as `reversi/idempotency_key`.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext

from reversi.core import redaction
from reversi.core.calls import current_call
from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject
from reversi.core.scopes import Selection
from reversi.engine.access import Access
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.engine.rollback import MAX_CONCURRENCY
from reversi.engine.run import Run
from reversi.errors import BadInput, NotFound, ReversiError
from reversi.gateway.compensation_check import upstream_differences
from reversi.gateway.proxy import DoorFor
from reversi.gateway.results import from_error, structured
from reversi.gateway.undo_calls import ROLLBACK_RETRY, UndoCalls
from reversi.gateway.upstream import UpstreamPool

log = logging.getLogger("reversi.gateway")
NO_MANIFESTS = ("no manifests in force: start the gateway with -m FILE, or set manifests: in reversi.yaml or "
                "REVERSI_MANIFEST")

_MAX_STEP = 999_999_999  # as the HTTP API reads a step: nine digits at most


def _schema(properties: LooseJSONObject, required: list[str]) -> LooseJSONObject:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_RUN_ID = {"type": "string", "description": "The run, e.g. run_abc"}
_SCOPE = {
    "to": {"type": ["string", "null"], "description": "Only the steps after this checkpoint; earlier ones are kept"},
    "after_step": {"type": ["integer", "null"], "minimum": -1,
                   "description": "Only the steps after this step number (not with `to`)"},
}
_CONCURRENCY = {"concurrency": {"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY, "default": 1,
                                "description": "Undo up to this many independent steps at once (never one while "
                                               "a step that depends on it stands)"}}
_SELECTION = {
    "actor": {"type": ["string", "null"], "description": "Runs of this actor"},
    "key": {"type": ["string", "null"], "description": "Runs of this key (the principal that opened them)"},
    "tenant": {"type": ["string", "null"], "description": "Runs of this tenant"},
    "labels": {"type": ["object", "null"], "additionalProperties": {"type": "string"},
               "description": "Runs with each of these labels"},
    "tool": {"type": ["string", "null"], "description": "Only steps of tools matching this glob"},
    "since": {"type": ["string", "null"], "description": "Only steps journaled from then (30m, 2h, 7d or a date)"},
    "until": {"type": ["string", "null"], "description": "Only steps journaled until then"},
}
TOOLS = [
    types.Tool(
        name="reversi.plan_rollback",
        description="The rollback plan of a run: what undoing it would do, step by step, newest first.",
        input_schema=_schema({"run_id": _RUN_ID, **_SCOPE}, ["run_id"]),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="reversi.execute_rollback",
        description="Roll a run back through the upstreams' compensation tools. A dry run (the plan) unless confirm.",
        input_schema=_schema(
            {
                "run_id": _RUN_ID,
                "confirm": {"type": "boolean", "default": False},
                "approve_compensations": {"type": "boolean", "default": False},
                **_CONCURRENCY,
                **_SCOPE,
            },
            ["run_id"],
        ),
        annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    ),
    types.Tool(
        name="reversi.plan_scope",
        description="The plan of rolling back many runs (an actor's, a key's, a tenant's, labelled ones; the steps "
                    "of a tool glob or a time window): one walk, newest first across runs.",
        input_schema=_schema(_SELECTION, []),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="reversi.rollback_scope",
        description="Roll back many runs through the upstreams' compensation tools. A dry run (the plan) unless "
                    "confirm; contain (an admin's) first halts the scope and revokes the key.",
        input_schema=_schema(
            {
                **_SELECTION,
                "confirm": {"type": "boolean", "default": False},
                "contain": {"type": "boolean", "default": False},
                "reason": {"type": ["string", "null"], "description": "With contain: the halt's reason"},
                "approve_compensations": {"type": "boolean", "default": False},
                **_CONCURRENCY,
            },
            [],
        ),
        annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    ),
    types.Tool(
        name="reversi.resolve_step",
        description="Settle an unresolved (intended or uncertain) step as succeeded, with the result found, or failed.",
        input_schema=_schema(
            {
                "run_id": _RUN_ID,
                "step": {"type": "integer", "minimum": 0},
                "status": {"type": "string", "enum": ["succeeded", "failed"]},
                "note": {"type": "string", "description": "How you settled it (required)"},
                "result": {"description": "The call's result, when it succeeded"},
                "actor": {"type": ["string", "null"]},
            },
            ["run_id", "step", "status", "note"],
        ),
    ),
    types.Tool(
        name="reversi.reconcile",
        description="Settle the run's intended and uncertain steps from what their manifests' probes read on the "
                    "upstreams; a step no probe can tell about stays unresolved.",
        input_schema=_schema({"run_id": _RUN_ID}, ["run_id"]),
    ),
    types.Tool(
        name="reversi.follow_ups",
        description="The follow-ups rollbacks opened for the steps of a run they could not undo (what people "
                    "still have to do), in the order opened, secrets masked.",
        input_schema=_schema({"run_id": _RUN_ID}, ["run_id"]),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="reversi.close_follow_up",
        description="Close the follow-up of a step of a run, saying what was done (note).",
        input_schema=_schema(
            {
                "run_id": _RUN_ID,
                "step": {"type": "integer", "minimum": 0},
                "note": {"type": "string", "description": "What was done (required; kept in the journal)"},
                "actor": {"type": ["string", "null"], "description": "Who did it (default: the key's name)"},
            },
            ["run_id", "step", "note"],
        ),
    ),
    types.Tool(
        name="reversi.list_runs",
        description="Runs newest first, with counts of their steps; `status` keeps runs with a step in that status.",
        input_schema=_schema(
            {
                "status": {"type": ["string", "null"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
            },
            [],
        ),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="reversi.halt",
        description="Stop every new call of every run (an unscoped halt); rollbacks keep working.",
        input_schema=_schema({"reason": {"type": "string"}}, ["reason"]),
    ),
    types.Tool(
        name="reversi.resume",
        description="Lift every halt.",
        input_schema=_schema({}, []),
    ),
]


_KNOWN = {tool.name: set(tool.input_schema["properties"]) for tool in TOOLS}


def _no_unknown(tool: str, args: LooseJSONObject) -> None:
    """A misspelt argument (`confrim`) must not quietly turn a rollback into a dry run."""
    unknown = sorted(set(args) - _KNOWN[tool])
    if unknown:
        known = ", ".join(sorted(_KNOWN[tool])) or "none"
        raise BadInput(f"{tool} has no argument {unknown[0]!r} (its arguments: {known})")


def _arg(args: LooseJSONObject, name: str, kind: type | tuple[type, ...], default: LooseJSON = ...) -> LooseJSON:
    if name not in args or args[name] is None:
        if default is ...:
            raise BadInput(f"{name} is required")
        return default
    value = args[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise BadInput(f"{name} has the wrong type")
    return value


def _selection(args: LooseJSONObject) -> Selection:
    """The scope of many runs the arguments give (read as every surface reads it)."""
    return Selection.typed(actor=_arg(args, "actor", str, None), key=_arg(args, "key", str, None),
                           tenant=_arg(args, "tenant", str, None), labels=_arg(args, "labels", dict, {}),
                           tool=_arg(args, "tool", str, None), since=_arg(args, "since", str, None),
                           until=_arg(args, "until", str, None))


def _scope(args: LooseJSONObject) -> LooseJSONObject:
    """The `to` and `after_step` arguments, of their types (the engine checks the rest)."""
    return {"to": _arg(args, "to", str, None), "after_step": _arg(args, "after_step", int, None)}


class Operator:
    """The operator tools, acting through the door `door_for` gives each request (its principal's)."""

    def __init__(self, door_for: DoorFor, pool: UpstreamPool, call_timeout: float) -> None:
        self.door_for = door_for
        self.pool = pool
        self.call_timeout = call_timeout
        self.undo_calls = UndoCalls(pool, call_timeout)

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        handlers = {
            "reversi.plan_rollback": self._plan,
            "reversi.execute_rollback": self._execute,
            "reversi.plan_scope": self._plan_scope,
            "reversi.rollback_scope": self._rollback_scope,
            "reversi.resolve_step": self._resolve,
            "reversi.reconcile": self._reconcile,
            "reversi.follow_ups": self._follow_ups,
            "reversi.close_follow_up": self._close_follow_up,
            "reversi.list_runs": self._list_runs,
            "reversi.halt": self._halt,
            "reversi.resume": self._resume,
        }
        handler = handlers.get(params.name)
        if handler is None:
            return from_error(NotFound(f"no operator tool {params.name}"))
        try:
            _no_unknown(params.name, params.arguments or {})
            door = self.door_for(ctx)
            return await handler(door, params.arguments or {})
        except ReversiError as exc:
            return from_error(exc)

    def _run(self, door: PrincipalLedger, args: LooseJSONObject) -> Run:
        return door.get_run(_arg(args, "run_id", str), Access.OPERATE)

    async def _plan(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run = await anyio.to_thread.run_sync(self._run, door, args)
        plan = await anyio.to_thread.run_sync(lambda: door.plan(run.id, **_scope(args)))
        if not door.settings.manifests and plan.unmanifested:
            plan = plan.noting(NO_MANIFESTS)
        return await self._warned(run, structured(plan.to_dict(), plan.to_text()))

    async def _warned(self, run: Run, answer: types.CallToolResult) -> types.CallToolResult:
        """`answer` with a warning first (and on stderr) for each upstream of the run's calls that
        this operator does not have, or started otherwise; the lines also in `_meta` as `reversi/warnings`."""
        lines = upstream_differences(self.pool, await anyio.to_thread.run_sync(run.events))
        for line in lines:
            log.warning("%s: %s", run.id, line)
        if not lines:
            return answer
        warning = types.TextContent(text="\n".join(f"warning: {line}" for line in lines))
        return answer.model_copy(update={"content": [warning, *answer.content], "meta": {"reversi/warnings": lines}})

    async def _execute(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run = await anyio.to_thread.run_sync(self._run, door, args)
        scope = _scope(args)
        if not _arg(args, "confirm", bool, False):
            plan = await anyio.to_thread.run_sync(lambda: door.plan(run.id, **scope))
            return await self._warned(run, structured(plan.to_dict(), plan.to_text()))
        report = await run.arollback(
            compensate=self.undo_calls.compensate,
            retry=ROLLBACK_RETRY,
            verifier=self.undo_calls.read_back,
            approve_compensations=_arg(args, "approve_compensations", bool, False),
            actor=door.principal.name,
            concurrency=_arg(args, "concurrency", int, 1),
            **scope,
        )
        masker = await anyio.to_thread.run_sync(lambda: redaction.learn(door.masker(), run.snapshot().steps))
        shown = structured(redaction.report(masker, report.to_dict()), masker.text(report.to_text()))
        return await self._warned(run, shown)

    async def _plan_scope(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        selection = _selection(args)
        plan = await anyio.to_thread.run_sync(door.plan_scope, selection)
        return structured(plan.to_dict(), plan.to_text())

    async def _rollback_scope(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        selection = _selection(args)
        contain, reason = _arg(args, "contain", bool, False), _arg(args, "reason", str, None)
        if not _arg(args, "confirm", bool, False):
            if contain:
                raise BadInput("contain stops new calls: give it with confirm: true")
            plan = await anyio.to_thread.run_sync(door.plan_scope, selection)
            return structured(plan.to_dict(), plan.to_text())
        report = await door.arollback_scope(
            selection, self.undo_calls.compensate, contain=contain, reason=reason, retry=ROLLBACK_RETRY,
            verifier=self.undo_calls.read_back, approve_compensations=_arg(args, "approve_compensations", bool, False),
            actor=door.principal.name, concurrency=_arg(args, "concurrency", int, 1))
        masker = door.masker()
        return structured(redaction.report(masker, report.to_dict()), masker.text(report.to_text()))

    async def _resolve(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run_id = _arg(args, "run_id", str)
        step = _arg(args, "step", int)
        status = _arg(args, "status", str)
        note = _arg(args, "note", str)
        actor = _arg(args, "actor", str, None)
        found = {"result": args["result"]} if "result" in args else {}
        state = await anyio.to_thread.run_sync(
            lambda: door.resolve(run_id, step, status, note=note, actor=actor, **found))
        return structured(state.to_dict(), f"step {step} of {run_id} is now {state.status.value}")

    async def _reconcile(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run_id = _arg(args, "run_id", str)

        def read(tool: str, arguments: LooseJSON) -> LooseJSON:  # in the worker thread: the upstreams live on the loop
            return anyio.from_thread.run(self.undo_calls.read_back, tool, arguments, current_call())

        shown = await anyio.to_thread.run_sync(lambda: door.reconcile_by_probes(run_id, read, masked=True))
        return structured({"run_id": run_id, "steps": [p.to_dict() for p in shown]},
                          "\n".join(p.describe() for p in shown) or "no step is unresolved")

    async def _follow_ups(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run_id = _arg(args, "run_id", str)
        found = await anyio.to_thread.run_sync(lambda: door.follow_ups(run_id, masked=True))
        return structured({"run_id": run_id, "follow_ups": [f.to_dict() for f in found]},
                          "\n".join(f.describe() for f in found) or f"{run_id} has no follow-ups")

    async def _close_follow_up(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        run_id, step, note = _arg(args, "run_id", str), _arg(args, "step", int), _arg(args, "note", str)
        if not 0 <= step <= _MAX_STEP:
            raise BadInput("step must be a step number: a whole number from 0 to 999999999")
        actor = _arg(args, "actor", str, None)

        def close() -> JSONObject:
            door.close_follow_up(run_id, step, note, actor=actor)
            return next(f for f in door.follow_ups(run_id, masked=True) if f.step == step).to_dict()

        closed = await anyio.to_thread.run_sync(close)
        return structured(closed, f"closed {closed['follow_up_id']} (step {step} of {run_id})")

    async def _list_runs(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        limit = _arg(args, "limit", int, 50)
        if not 1 <= limit <= 1000:
            raise BadInput("limit must be from 1 to 1000")
        status = _arg(args, "status", str, None)
        runs = await anyio.to_thread.run_sync(lambda: door.list_runs(status=status, limit=limit).items)
        items = [r.to_dict() for r in runs]
        text = "\n".join(f"{r['run_id']}  steps={r['steps']} standing={r['standing']} unresolved={r['unresolved']}"
                         for r in items)
        return structured({"runs": items}, text or "no runs")

    async def _halt(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        reason = _arg(args, "reason", str)
        halt = await anyio.to_thread.run_sync(lambda: door.add_halt(reason))
        return structured(halt.to_dict(), f"{halt.halt_id}  {halt.reason}")

    async def _resume(self, door: PrincipalLedger, args: LooseJSONObject) -> types.CallToolResult:
        lifted = await anyio.to_thread.run_sync(door.lift_halts)
        return structured({"lifted": lifted}, f"lifted {lifted}")

    def server(self) -> Server[Any]:
        server: Server[Any] = Server(
            "reversi-operator",
            version=_version(),
            instructions="Reversi operator tools: plan and roll back agent runs, settle unknown steps, halt calls.",
            get_tool_input_schema=lambda name: next((t.input_schema for t in TOOLS if t.name == name), None),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )
        server.middleware = []
        return server


def _version() -> str:
    from reversi.distribution import version

    return version()

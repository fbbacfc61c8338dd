"""Hostile MCP messages for the gateway, and what must hold after each one.

The messages (hypothesis strategies): JSON-RPC with every field wrong in turn, `tools/call` with
arguments of the wrong type, huge or nested past any limit, `_meta` that passes itself off as
Reversi's or as the protocol's envelope, unknown methods, JSON that is not JSON-RPC, and bytes that
are not JSON at all. What must hold: the gateway answers (or ignores) each and keeps serving, writes
only JSON-RPC on its stdout and no traceback on stderr, and every call that reached the upstream was
journaled before it, with the arguments the upstream got.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from tests.gateway.conftest import SHOP_MANIFEST, Shop
from tests.gateway.http_wire import ENVELOPE

import reversi
from reversi.core.calls import IDEMPOTENCY_META_KEY
from reversi.gateway.operator import TOOLS as OPERATOR_TOOLS

COMPENSATION_KEY = IDEMPOTENCY_META_KEY

# The test upstream's tools, less `wait` and `slow` (they answer when a test says so, or after as many
# progress reports as the arguments ask for); and names no upstream has.
TOOLS = ["create_order", "cancel_order", "get_order", "echo", "fail", "rpc_error", "server_error", "env", "ask",
         "reversi.halt", "", "echo\x00", "ech", "e" * 5000, "../echo", "echo; rm -rf /"]
METHODS = ["tools/call", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list",
           "prompts/get", "completion/complete", "initialize", "ping", "server/discover", "logging/setLevel",
           "notifications/initialized", "notifications/cancelled", "notifications/roots/list_changed",
           "sampling/createMessage", "reversi/rollback", "tools/call/", "TOOLS/CALL"]
META_KEYS = ["reversi/idempotency_key", "reversi/run_id", "reversi/warnings", "io.modelcontextprotocol/protocolVersion",
             "io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo", "progressToken",
             "traceparent", "vendor/x"]

SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=16)
ODD_IDS = st.integers(-(2**70), 2**70) | st.none() | st.floats() | st.booleans() | st.lists(st.integers(), max_size=2)
IDS = st.integers(0, 10**6) | st.text(max_size=10) | ODD_IDS


def _meta(extra: dict[str, Any], envelope: bool) -> dict[str, Any]:
    return {**(ENVELOPE if envelope else {}), **extra}


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    """A `tools/call`, mostly well-formed around one part that is not."""
    name = st.sampled_from(TOOLS) | st.text(max_size=20) | JSON
    params: dict[str, Any] = {"name": draw(st.sampled_from(TOOLS) if draw(st.integers(0, 4)) else name)}
    arguments = draw(st.one_of(
        st.fixed_dictionaries({"order_id": st.text(max_size=12)}, optional={"amount": JSON}),
        st.dictionaries(st.text(max_size=12), JSON, max_size=5),
        JSON,
        st.just({"text": "x" * 300_000}),
    ))
    if draw(st.booleans()) or not isinstance(arguments, dict):
        params["arguments"] = arguments
    meta = draw(st.dictionaries(st.sampled_from(META_KEYS) | st.text(max_size=12), JSON, max_size=3))
    params["_meta"] = _meta(meta, draw(st.integers(0, 9)) > 0)
    request_id = draw(st.integers(0, 10**6) if draw(st.integers(0, 4)) else IDS)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return message


@st.composite
def other_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Any method, any params, any id, any version: JSON-RPC bent out of shape."""
    message: dict[str, Any] = {}
    for field, values in (("jsonrpc", st.just("2.0") | JSON), ("id", IDS), ("method", st.sampled_from(METHODS) | JSON),
                          ("params", JSON.map(lambda p: {**p, "_meta": ENVELOPE} if isinstance(p, dict) else p)),
                          ("result", JSON), ("error", JSON)):
        if draw(st.integers(0, 3)) > 0 if field in ("jsonrpc", "method", "id") else draw(st.booleans()):
            message[field] = draw(values)
    return message


def deep(levels: int) -> bytes:
    """A `tools/call` whose arguments nest `levels` deep: written by hand, as json.dumps would refuse."""
    head = json.dumps({"jsonrpc": "2.0", "id": "deep", "method": "tools/call",
                       "params": {"name": "echo", "_meta": ENVELOPE}})[:-2]
    return (head + ', "arguments": {"text": ' + "[" * levels + "]" * levels + "}}}").encode()


RAW = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" ")) | JSON.map(lambda v: json.dumps(v).encode())
MESSAGES = st.one_of(
    tool_calls().map(lambda m: json.dumps(m).encode()),
    other_messages().map(lambda m: json.dumps(m).encode()),
    RAW,
    st.sampled_from([deep(100), deep(5000), deep(200_000), b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
                     b'"params": {"name": "echo", "arguments": {"text": NaN}}}', b"[]", b"[{}]", b"{}", b"null"]),
)


def gateway_flags(tmp_path: Path) -> tuple[Shop, str, list[str]]:
    """The test upstream, a SQLite store, and the gateway flags that use them with the shop's manifest."""
    shop = Shop("shop", tmp_path / "shop")
    db = f"sqlite:///{tmp_path}/fuzz.db"
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(SHOP_MANIFEST)
    return shop, db, ["--upstream", shop.flag(), "--db", db, "-m", str(manifest)]


def journal_problems(shop: Shop, db: str) -> list[str]:
    """What breaks the rules between the upstream and the journal (of every run in `db`): an agent's
    call the upstream got with no journaled step of that tool and those arguments; a step journaled
    `succeeded` that never reached the upstream; a compensation (its idempotency key in `_meta`) the
    upstream got with no `compensating` journaled for that key."""
    with reversi.open(db) as ledger:
        runs = [ledger.get_run(summary.run.run_id) for summary in ledger.list_runs()]
        steps = [step for run in runs for step in run.steps()]
        undoing = {e.data.get("idempotency_key") for run in runs for e in run.events() if e.type == "compensating"}
    calls = shop.calls()
    journaled = Counter(_key(s.tool, s.args) for s in steps)
    forwarded = Counter(_key(c["tool"], c["arguments"]) for c in calls if COMPENSATION_KEY not in c["meta"])
    problems = [f"forwarded unjournaled: {call}" for call in forwarded - journaled]
    claimed = Counter(_key(s.tool, s.args) for s in steps if s.status.value == "succeeded")
    problems += [f"journaled succeeded, never forwarded: {call}" for call in claimed - forwarded]
    problems += [f"compensation unjournaled: {c}" for c in calls
                 if COMPENSATION_KEY in c["meta"] and c["meta"][COMPENSATION_KEY] not in undoing]
    return problems


def _key(tool: str, args: Any) -> str:
    return json.dumps([tool, args], sort_keys=True)


@st.composite
def operator_calls(draw: st.DrawFn, run_ids: list[str]) -> dict[str, Any]:
    """A `tools/call` of the operator's tools, its arguments mostly of the right names."""
    names = [tool.name for tool in OPERATOR_TOOLS] + ["reversi.nope", "plan_rollback", ""]
    run_id = st.sampled_from([*run_ids, "run_missing", "run_" + "x" * 70, "../etc", ""]) | JSON
    arguments = draw(st.fixed_dictionaries({}, optional={
        "run_id": run_id, "confirm": st.booleans() | JSON, "approve_compensations": st.booleans() | JSON,
        "step": st.integers(-2, 5) | JSON, "status": st.sampled_from(["succeeded", "failed", "x"]) | JSON,
        "note": st.text(max_size=20) | JSON, "result": JSON, "reason": st.text(max_size=20) | JSON,
        "limit": st.integers(-1, 2000) | JSON, "confrim": st.booleans()}) | JSON)
    params: dict[str, Any] = {"name": draw(st.sampled_from(names)), "_meta": ENVELOPE}
    if isinstance(arguments, dict) or draw(st.booleans()):
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": draw(st.integers(0, 10**6)), "method": "tools/call", "params": params}

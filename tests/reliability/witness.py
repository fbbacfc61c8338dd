"""The witness: the downstream world of the fault campaign, in a process of its own, logging every effect.

    python witness.py DIR STORE_URL

It serves the world two ways at once: as an MCP server over streamable HTTP (the gateway's upstream:
forward calls, compensations with their idempotency key in `_meta`, read-backs), and on an abstract Unix
socket (`witness_client.py`: the SDK's and the server's effects, the compensator and reader commands,
and the campaign's controls). It prints `{"socket": NAME, "mcp": URL}` once it listens.

Each call is logged to DIR/witness.jsonl (fsynced) before it is answered, with what the witness found
committed in the store at that moment: the call's `intended` event, or how many `compensating` events
carry the compensation's key. That log is the truth the checker holds the journal to; the process
under test cannot take it back, however it dies. The witness is also the campaign's hand: armed with
a pid, it SIGKILLs it a set delay after the n-th call.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.reliability.journal import RawEvent, RawStore
from tests.reliability.world import CREATES, READ_BACK, READS, UNDOES, WITNESS_LOG, append_line

IDEMPOTENCY_META_KEY = "reversi/idempotency_key"
SLOW_S = 1.0  # a `timeout` call over MCP is answered this late: after the gateway's call timeout


class Refusal(Exception):
    """The downstream says no: an error answer, nothing changed."""


@dataclass
class Thing:
    """An object a forward call created."""

    tool: str
    live: bool = True
    undo_fails: int = 0
    read_lag: int = 0
    stale_reads: int = 0
    undone_by: str | None = None


def _where(event: RawEvent | None) -> dict[str, Any] | None:
    if event is None:
        return None
    return {"run_id": event.run_id, "step": event.step, "seq": event.seq, "at": event.at}


class Witness:
    """The world's state and its log; every method runs to the end without yielding (one at a time)."""

    def __init__(self, directory: Path, store_url: str) -> None:
        self.log = directory / WITNESS_LOG
        self.store_url = store_url
        self._raw: RawStore | None = None
        self.things: dict[str, Thing] = {}
        self.answers: dict[str, Any] = {}  # idempotency key -> the answer of its undo
        self.undo_calls: Counter[str] = Counter()
        self.undo_failures: Counter[str] = Counter()
        self.n = 0
        self.trigger: Trigger | None = None

    @property
    def raw(self) -> RawStore:
        if self._raw is None:  # the campaign creates the store before the first call
            self._raw = RawStore(self.store_url)
        return self._raw

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()

    def _record(self, entry: dict[str, Any]) -> None:
        self.n += 1
        append_line(self.log, {"n": self.n, "t": time.time_ns(), **entry})
        if self.trigger is not None and entry["kind"] != "kill":
            self.trigger.seen(self)

    def forward(self, tool: str, args: dict[str, Any]) -> Any:
        op = args.get("op")
        journaled = _where(self.raw.intended_for(op)) if isinstance(op, str) else None
        entry: dict[str, Any] = {"kind": "forward", "tool": tool, "op": op, "args": args, "journaled": journaled}
        if tool in READS:
            entry.update(effect=False, result={"id": op, "found": True})
        elif tool in (*UNDOES, READ_BACK) or args.get("fail") or not isinstance(op, str) or op in self.things:
            entry.update(effect=False, error=f"the downstream refused {tool} {op}")
        else:
            self.things[op] = Thing(tool, undo_fails=int(args.get("undo_fails", 0)),
                                    read_lag=int(args.get("read_lag", 0)))
            entry.update(effect=True, result={"id": op, "tool": tool})
        self._record(entry)
        if "error" in entry:
            raise Refusal(entry["error"])
        return entry["result"]

    def compensate(self, tool: str, args: Any, key: str | None, call: dict[str, Any] | None, via: str) -> Any:
        events = self.raw.compensating_for(key) if key else []
        first = events[0] if events else None
        self.undo_calls[key or ""] += 1
        target = args.get("id") if isinstance(args, dict) else None
        entry: dict[str, Any] = {
            "kind": "compensate", "tool": tool, "args": args, "key": key, "via": via, "target": target,
            "call_no": self.undo_calls[key or ""], "journaled": len(events),
            "run_id": first.run_id if first else (call or {}).get("run_id"),
            "step": first.step if first else (call or {}).get("step"),
            "attempt": (call or {}).get("attempt"),
        }
        thing = self.things.get(target) if isinstance(target, str) else None
        if key is not None and key in self.answers:
            entry.update(outcome="repeat", result=self.answers[key])
        elif tool not in UNDOES or thing is None:
            entry.update(outcome="missing", error=f"{tool}: no object {target!r} to undo")
        elif self.undo_failures[key or ""] < thing.undo_fails:
            self.undo_failures[key or ""] += 1
            failures = self.undo_failures[key or ""]
            entry.update(outcome="failed", error=f"{tool}: the downstream is busy (failure {failures})")
        else:
            entry["outcome"] = "applied" if thing.live else "again"
            thing.live, thing.stale_reads = False, thing.read_lag
            thing.undone_by = thing.undone_by or key
            entry["result"] = {"undone": target, "by": tool}
            if key is not None:
                self.answers[key] = entry["result"]
        self._record(entry)
        if "error" in entry:
            raise Refusal(entry["error"])
        return entry["result"]

    def read(self, tool: str, arguments: Any) -> Any:
        target = arguments.get("id") if isinstance(arguments, dict) else None
        thing = self.things.get(target) if isinstance(target, str) else None
        exists = thing is not None and thing.live
        if thing is not None and not thing.live and thing.stale_reads > 0:
            thing.stale_reads -= 1
            exists = True  # an eventually consistent downstream: the undo does not show yet
        answer = {"id": target, "exists": exists}
        self._record({"kind": "read", "tool": tool, "arguments": arguments, "answer": answer,
                      "stale": exists and thing is not None and not thing.live})
        if tool != READ_BACK:
            raise Refusal(f"no read tool {tool}")
        return answer

    def verify(self, call: dict[str, Any]) -> Any:
        """A `--verify-cmd`: whether the call's undo shows (the truth, no lag); a Refusal when it does not."""
        args = call.get("args")
        target = args.get("id") if isinstance(args, dict) else None
        thing = self.things.get(target) if isinstance(target, str) else None
        undone = thing is not None and not thing.live
        self._record({"kind": "verify", "key": call.get("idempotency_key"), "target": target, "undone": undone})
        if not undone:
            raise Refusal(f"{target} is not undone")
        return {"undone": target}

    def killed(self, trigger: Trigger) -> None:
        self._record({"kind": "kill", "pid": trigger.pid, "label": trigger.label, "after": trigger.after,
                      "delay_ms": trigger.delay_ms})


class Trigger:
    """SIGKILL `pid` `delay_ms` after the `after`-th call the witness logs from now (after 0: from now)."""

    def __init__(self, pid: int, after: int, delay_ms: float, label: str, witness: Witness) -> None:
        self.pid, self.after, self.delay_ms, self.label = pid, after, delay_ms, label
        self.count = 0
        self.fired = False
        self._timer: asyncio.TimerHandle | None = None
        if after == 0:
            self._schedule(witness)

    def seen(self, witness: Witness) -> None:
        self.count += 1
        if self.count == self.after:
            self._schedule(witness)

    def _schedule(self, witness: Witness) -> None:
        if self.delay_ms <= 0:
            self.fire(witness)  # before the call is answered
        else:
            self._timer = asyncio.get_running_loop().call_later(self.delay_ms / 1000, self.fire, witness)

    def fire(self, witness: Witness) -> None:
        if self.fired:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return  # it had ended on its own
        self.fired = True
        witness.killed(self)

    async def due(self) -> None:
        """Wait for a kill already scheduled: it lands at its moment even when the work ended first
        (a faster process must not make the seeds' kills miss)."""
        if self._timer is not None and not self._timer.cancelled() and not self.fired:
            await asyncio.sleep(max(0.0, self._timer.when() - asyncio.get_running_loop().time()) + 0.001)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class Activity:
    """Calls in flight and the time of the last one begun, for `settle`."""

    def __init__(self) -> None:
        self.inflight = 0
        self.last = time.monotonic()

    def begin(self) -> None:
        self.inflight += 1
        self.last = time.monotonic()

    def end(self) -> None:
        self.inflight -= 1

    async def settle(self, quiet_ms: float) -> None:
        while self.inflight or (time.monotonic() - self.last) * 1000 < quiet_ms:
            await asyncio.sleep(0.002)


# -- serving -----------------------------------------------------------------------------------------


class Service:
    """The witness on its socket and over MCP, with the campaign's controls."""

    def __init__(self, witness: Witness) -> None:
        self.witness = witness
        self.activity = Activity()

    def call(self, request: dict[str, Any]) -> Any:
        """One request of the socket protocol; raises Refusal for a downstream error."""
        op = request["op"]
        w = self.witness
        if op == "forward":
            return w.forward(request["tool"], request["args"])
        if op == "compensate":
            call = request["call"]
            return w.compensate(call["tool"], call["args"], call.get("idempotency_key"), call, "command")
        if op == "read":
            return w.read(request["tool"], request["arguments"])
        if op == "verify":
            return w.verify(request["call"])
        if op == "arm":
            if w.trigger is not None:
                w.trigger.cancel()
            w.trigger = Trigger(request["pid"], request["after"], request["delay_ms"], request["label"], w)
            return None
        if op == "disarm":
            trigger, w.trigger = w.trigger, None
            if trigger is not None:
                trigger.cancel()
            return bool(trigger and trigger.fired)
        raise Refusal(f"unknown request {op!r}")

    async def on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            if not line:
                return
            request = json.loads(line)
            if request["op"] == "settle":
                await self.activity.settle(request["quiet_ms"])
                reply: dict[str, Any] = {"result": None}
            else:
                if request["op"] == "disarm" and self.witness.trigger is not None:
                    await self.witness.trigger.due()
                self.activity.begin()
                try:
                    reply = {"result": self.call(request)}
                except Refusal as exc:
                    reply = {"error": str(exc)}
                finally:
                    self.activity.end()
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, BrokenPipeError):
            pass  # the caller died waiting: what it asked for is in the log all the same
        finally:
            writer.close()

    def mcp_app(self) -> Any:
        from mcp import types
        from mcp.server import Server, ServerRequestContext

        names = (*CREATES, *READS, *UNDOES, READ_BACK)
        tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]

        async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(params.arguments or {})
            meta = dict(params.meta or {})
            self.activity.begin()
            try:
                if args.get("timeout"):  # outlive the gateway's call timeout, then act (unless cancelled)
                    await asyncio.sleep(SLOW_S)
                if params.name in UNDOES:
                    key = meta.get(IDEMPOTENCY_META_KEY)
                    answer = self.witness.compensate(params.name, args, key if isinstance(key, str) else None,
                                                     None, "mcp")
                elif params.name == READ_BACK:
                    answer = self.witness.read(params.name, args)
                else:
                    answer = self.witness.forward(params.name, args)
            except Refusal as exc:
                return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
            finally:
                self.activity.end()
            return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer))], structured_content=answer)

        server = Server("witness", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
        return server.streamable_http_app(json_response=True, host="127.0.0.1")


async def serve(directory: Path, store_url: str) -> None:
    import uvicorn

    service = Service(Witness(directory, store_url))
    name = f"reversi-witness-{uuid.uuid4().hex}"
    unix = await asyncio.start_unix_server(service.on_connection, path="\0" + name)
    http = uvicorn.Server(uvicorn.Config(service.mcp_app(), host="127.0.0.1", port=0, log_level="warning",
                                         lifespan="on", access_log=False))
    serving = asyncio.ensure_future(http.serve())
    while not http.started:
        if serving.done():
            serving.result()  # raises what stopped it
        await asyncio.sleep(0.01)
    port = http.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"socket": name, "mcp": f"http://127.0.0.1:{port}/mcp"}), flush=True)
    async with unix:
        await serving


def main() -> None:
    directory, store_url = Path(sys.argv[1]), sys.argv[2]
    directory.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(directory, store_url))


if __name__ == "__main__":
    main()

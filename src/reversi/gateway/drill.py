"""`reversi manifest drill`: one write tool called on a scratch server and undone through the engine,
with the world read before and after, and the evidence recorded.

The server is started in a throwaway folder (`{scratch}` in its command line and environment is that
folder; it is also the working directory), so the drill touches no real data. Setup calls, made
first and not journaled, give the world something that existed before. The forward call is journaled
in a scratch store as the gateway journals calls, and rolled back as the gateway's operator rolls
back (`Run.arollback` with the compensations' idempotency keys in `_meta`), through `UndoCalls`.
The world is whatever the read tools answer: the server's read-only tools that need no arguments,
and those the user names with their arguments.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcp import types

import reversi
from reversi.core.answers import TextAnswer
from reversi.core.drill import Drill, differences, new_drill_id, only_reads, verdict_of
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject, compact
from reversi.core.manifest import ManifestSet, ToolEntry
from reversi.core.models import StepStatus, utc_now
from reversi.core.printable import for_terminal
from reversi.core.tool_listing import ListedTool, Listing
from reversi.engine.capture import take_capture
from reversi.engine.ledger import Ledger
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.errors import CaptureFailed, ConfigError, DrillFailed
from reversi.gateway.live import SCRATCH, connected, listing_of, upstream_spec
from reversi.gateway.results import error_text, is_error, journaled_answer, result_value
from reversi.gateway.undo_calls import ROLLBACK_RETRY, UndoCalls
from reversi.gateway.upstream import UpstreamPool
from reversi.gateway.upstream_calls import call_upstream

__all__ = ["DrillRequest", "drillable", "run_drill"]

_ACTOR = "reversi manifest drill"
_UNDO_EVENTS = ("approval_requested", "approval_granted", "compensating", "compensated", "compensation_failed",
                "verified", "verification_failed", "unverified")


@dataclass(frozen=True)
class DrillRequest:
    """What to drill, and on what.

    Attributes:
        upstream: The server's command line (or URL); `{scratch}` is the scratch folder.
        reads: Read tools (and their arguments) whose answers are the world, besides the server's
            read-only tools that need no arguments.
        setup: Calls made before the world is first read, unjournaled.
        seed: A command run in the scratch folder before the server starts (`{scratch}` is that
            folder), to give it data on disk: `git init` for a git server.
        keep: Leave the scratch folder (and its store, with the drill's run) in place.
    """

    tool: str
    args: JSONObjectView
    upstream: str
    manifests: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    reads: tuple[tuple[str, JSONObjectView], ...] = ()
    setup: tuple[tuple[str, JSONObjectView], ...] = ()
    keep: bool = False
    call_timeout: float = 60.0
    config: str | None = None
    seed: str | None = None


async def run_drill(request: DrillRequest, evidence: PrincipalLedger) -> Drill:
    """Run the drill and record its evidence through `evidence`, the door of whoever drills.

    Raises:
        ConfigError: the tool has no entry, or one with no undo to drill; the server cannot start,
            or offers no read tool to compare the world with.
        DrillFailed: the server refused a setup call, a read or the forward call (nothing recorded).
    """
    root = tempfile.mkdtemp(prefix="reversi-drill-")
    scratch = str(Path(root) / "data")  # the server's; the drill's store beside it, out of its sight
    Path(scratch).mkdir()
    try:  # the loop also serves the server's pipes: the seed and every store call run in threads
        if request.seed is not None:
            await asyncio.to_thread(_seed, request.seed, scratch, request.call_timeout)
        ledger = await asyncio.to_thread(reversi.open, f"sqlite:///{root}/drill.db", manifests=request.manifests,
                                         config=request.config)
        try:
            entry = drillable(ledger.manifests, request.tool)
            async with connected(upstream_spec(request.upstream, request.env, scratch)) as pool:
                drill = await _drill(_Scratch(request, scratch, pool, ledger, entry))
        finally:
            await asyncio.to_thread(ledger.close)
        await asyncio.to_thread(evidence.record_drill, drill)
        return drill
    finally:
        if not request.keep:
            shutil.rmtree(root, ignore_errors=True)


def _seed(command: str, scratch: str, timeout: float) -> None:
    """Run the seed command (no shell: split as a shell would) in the scratch folder."""
    argv = [part.replace("{scratch}", scratch) for part in shlex.split(command)]
    try:
        done = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"--seed {command}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no error said"])[-1]
        raise ConfigError(f"--seed {command}: exited {done.returncode}: {for_terminal(said)}")


def drillable(manifests: ManifestSet, tool: str) -> ToolEntry:
    """The entry of `tool`, when it declares an undo to drill.

    Raises:
        ConfigError: no entry, or one with nothing to drill (a read, idempotent, irreversible, no undo).
    """
    entry = manifests.lookup(tool)
    if entry is None:
        raise ConfigError(f"{tool} has no manifest entry: a drill tries the undo an entry declares")
    if not entry.needs_undo:
        raise ConfigError(f"{tool} needs no undo (its entry says {'idempotent' if entry.idempotent else 'read'}): "
                          "nothing to drill")
    if entry.irreversible or not entry.compensations:
        said = "is irreversible by" if entry.irreversible else "has no compensation in"
        raise ConfigError(f"{tool} {said} its entry ({entry.source}:{entry.line}): nothing to drill")
    return entry


@dataclass
class _Scratch:
    request: DrillRequest
    folder: str
    pool: UpstreamPool
    ledger: Ledger
    entry: ToolEntry

    def __post_init__(self) -> None:
        self.calls = UndoCalls(self.pool, self.request.call_timeout)
        self.listing: Listing = listing_of(self.pool)

    async def capture_read(self, tool: str, arguments: LooseJSON) -> TextAnswer | LooseJSON:
        """The entry's capture, read as the gateway reads it (its text kept beside its JSON)."""
        return await call_upstream(self.pool, tool, arguments, self.request.call_timeout, keep_text=True)

    def placed(self, value: LooseJSON) -> LooseJSON:
        """`value` with `{scratch}` in every string replaced by the scratch folder."""
        if isinstance(value, str):
            return value.replace(SCRATCH, self.folder)
        if isinstance(value, Mapping):
            return {key: self.placed(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.placed(item) for item in value]
        return value

    async def raw(self, tool: str, arguments: LooseJSON) -> LooseJSONObject:
        upstream = self.pool.upstreams[0]
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
        try:
            return await upstream.request(request, self.request.call_timeout)
        except Exception as exc:  # a JSON-RPC error, a timeout, the server gone: the drill cannot go on
            raise DrillFailed(f"{tool}: the server did not answer: {type(exc).__name__}: {exc}") from exc

    def _reads_unasked(self, tool: ListedTool) -> bool:
        """A read the drill makes without being told: one the server marks read-only that requires no
        argument; or, where only the manifest says it reads, one that takes none at all (a server's
        optional arguments are not always optional)."""
        if not only_reads(tool, self.ledger.manifests):
            return False
        if tool.read_only_hint is True:
            return not tool.input_schema.get("required")
        return not tool.input_schema.get("properties")

    def reads(self) -> list[tuple[str, str, LooseJSON]]:
        """Each read of the world: its name in the evidence (the tool, and its arguments as given), the
        tool, and its arguments."""
        found: list[tuple[str, str, LooseJSON]] = [
            (tool.name, tool.name, {}) for tool in self.listing.tools if self._reads_unasked(tool)
        ]
        for tool, _ in self.request.reads:
            listed = self.listing.get(tool)
            if listed is None:
                raise ConfigError(f"--read {tool}: the server offers no such tool")
            if listed.read_only_hint is False:
                raise ConfigError(f"--read {tool}: the server says it is not read-only (readOnlyHint: false): "
                                  "reading the world with it could change it")
        found += [(f"{tool} {compact(dict(args))}" if args else tool, tool, self.placed(dict(args)))
                  for tool, args in self.request.reads]
        if not found:
            raise ConfigError("nothing to read the world with: the server has no read-only tool that needs no "
                              "arguments; name the read tools to compare the world with (--read TOOL=JSON)")
        return found

    async def world(self, reads: Sequence[tuple[str, str, LooseJSON]]) -> JSONObject:
        """Each read's answer (`{"error": TEXT}` for a tool error), by its name."""
        state: JSONObject = {}
        for name, tool, args in reads:
            raw = await self.raw(tool, args)
            state[name] = {"error": error_text(raw)} if is_error(raw) else result_value(raw)
        return state


async def _drill(s: _Scratch) -> Drill:
    for tool, args in s.request.setup:
        raw = await s.raw(tool, s.placed(dict(args)))
        if is_error(raw):
            raise DrillFailed(f"the setup call {tool} failed: {error_text(raw)}")
    reads = s.reads()
    before = await s.world(reads)
    args = s.placed(dict(s.request.args))
    run = await asyncio.to_thread(lambda: s.ledger.start_run(actor=_ACTOR, environment="drill"))
    try:  # as the gateway does: what the entry's capture reads before the call is journaled with it
        captured = await take_capture(s.entry, run.record, args, s.capture_read)
    except CaptureFailed as exc:
        raise DrillFailed(f"the capture before {s.request.tool} failed: {exc.message}") from None
    step = await s.ledger.abegin(run.record, s.request.tool, args, via=s.pool.upstreams[0].identity, before=captured)
    try:
        raw = await s.raw(s.request.tool, args)
    except DrillFailed as exc:
        await s.ledger.aoutcome(run.record, step, StepStatus.UNCERTAIN, error=str(exc))
        raise
    if is_error(raw):
        await s.ledger.aoutcome(run.record, step, StepStatus.FAILED, error=error_text(raw))
        raise DrillFailed(f"the forward call {s.request.tool} failed: {error_text(raw)}")
    forward = result_value(raw)
    await s.ledger.aoutcome(run.record, step, StepStatus.SUCCEEDED, result=journaled_answer(raw))
    volatile = s.entry.volatile
    changed = differences(before, await s.world(reads), volatile=volatile)  # nothing changed: the undo proves nothing
    action = next((a for a in (await asyncio.to_thread(run.plan)).actions if a.step == step), None)
    alternative = action.compensation.alternative if action is not None and action.compensation else None
    # The scratch store's approvals are the drill's to grant: the person who drills is the one asking.
    report = await run.arollback(compensate=s.calls.compensate, verifier=s.calls.read_back, retry=ROLLBACK_RETRY,
                                 approve_compensations=True, actor=_ACTOR)
    after = await s.world(reads)
    undo = [{"type": e.type, **e.data} for e in await asyncio.to_thread(run.events)
            if e.step == step and e.type in _UNDO_EVENTS]
    read_back = next((e for e in reversed(undo) if e["type"] in ("verified", "verification_failed")), None)
    found = differences(before, after, volatile=volatile)
    residue = action.compensation.residue if action is not None and action.compensation else s.entry.residue
    info = s.pool.upstreams[0].server_info
    return Drill(
        new_drill_id(),
        s.request.tool,
        info.name if info else "",
        info.version if info else "",
        # a call the plan skips (a dry run under read_when) needs no undo: the world must simply be as
        # before, and with no undo run nothing was put to the test
        verdict_of(step in report.compensated or step in report.skipped, bool(found), residue,
                   tested=bool(changed) and step not in report.skipped),
        utc_now(),
        {
            "args": args,
            "upstream": s.request.upstream,
            "scratch": str(Path(s.folder).parent) if s.request.keep else None,
            "run_id": run.id,
            "entry": {"source": str(Path(s.entry.source)), "line": s.entry.line, "digest": s.entry.digest},
            "setup": [{"tool": tool, "args": s.placed(dict(a))} for tool, a in s.request.setup],
            "forward": {"result": forward},
            "undo": {"report": report.to_dict(), "lines": list(report.lines), "events": undo},
            "read_back": read_back,
            "before": before,
            "changed_by_call": changed,
            "after": after,
            "differences": found,
            "residue": list(residue),
            "volatile": list(volatile),
        } | ({"alternative": alternative} if alternative is not None else {}),
    )


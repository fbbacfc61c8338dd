"""Reversi against a plain reference model (model.py): a hypothesis state machine that records, fails,
times out, crashes mid-call, settles, halts, resumes, pulls the kill switch, approves, denies, rolls back
(crashing mid-rollback too, or abandoning one as it starts) and reopens the store, in observe or enforce
mode, on both back ends, comparing every step's status, the approvals, the halts, the refusals journaled,
the plan and each rollback's report with what the model says; and, at the end of each example, the checker.

The downstream is the campaign's witness, in-process. A "crash" is what a process that dies leaves:
a call journaled `intended` and never reported, or a rollback that stops inside a compensation with
nothing journaled after it (Crash, a BaseException nobody catches); "reopen" closes the ledger and opens
the store again. `--hypothesis-profile=soak` runs many more examples.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from tests.reliability.checker import check
from tests.reliability.model import Crashed, Halt, Model, Report
from tests.reliability.witness import Witness
from tests.reliability.world import MANIFEST

import reversi
from reversi.errors import ReversiError

TOOLS = ("w_create", "w_charge", "w_attach", "w_guarded", "w_notify", "w_lookup", "w_ask", "w_order", "w_misc")
SCOPES: tuple[dict[str, str], ...] = ({}, {"tool": "w_*"}, {"tool": "w_order"}, {"actor": "sm"}, {"actor": "other"},
          {"tool": "w_c*", "actor": "sm"}, {"tenant": "*"}, {"tenant": "elsewhere"}, {"environment": "prod"})


class Crash(BaseException):
    """The process dies here: nothing runs after it, nothing is journaled after it."""


def ci_settings() -> settings:
    if settings.get_current_profile_name() == "soak":
        assert settings.default is not None
        return settings.default
    return settings(max_examples=12, stateful_step_count=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


class RunMachine(RuleBasedStateMachine):
    """One run (its own tenant, so duplicates of other examples' runs never meet it) and its model."""

    url = ""
    root = Path()

    def __init__(self) -> None:
        super().__init__()
        name = uuid.uuid4().hex[:12]
        self.directory = self.root / name
        self.directory.mkdir(parents=True)
        self.manifest = self.directory / "world.yaml"
        self.manifest.write_text(MANIFEST)
        self.kill_file = self.directory / "kill"
        self.config = self.directory / "reversi.yaml"
        self.config.write_text(f"kill_switch_file: {self.kill_file}\n")
        self.witness = Witness(self.directory, self.url)
        self.ledger = self._open()
        self.tenant = name
        self.model = Model(actor="sm", tenant=name)
        self.ops = (f"{name}-{n}" for n in itertools.count())

    def _open(self) -> reversi.Ledger:
        return reversi.open(self.url, manifests=[str(self.manifest)], config=str(self.config))

    @initialize(enforce=st.booleans())
    def start(self, enforce: bool) -> None:
        """Open the run, in observe or enforce mode (fixed for its life)."""
        self.run = self.ledger.start_run(actor="sm", tenant=self.tenant, mode="enforce" if enforce else "observe")
        self.model.enforce = enforce

    # -- recording -------------------------------------------------------------------------------

    def _args(self, tool: str, data: st.DataObject) -> dict[str, Any]:
        if tool == "w_ask":  # the same call again (after an approval, say), or a new one
            asked = sorted({a.call[1] for a in self.model.approvals if a.call})
            again = data.draw(st.sampled_from([*asked, ""]))
            if again:
                loaded: dict[str, Any] = json.loads(again)
                return loaded
        args: dict[str, Any] = {"op": next(self.ops), "undo_fails": data.draw(st.sampled_from((0, 0, 1, 2)))}
        if tool == "w_order":
            args["order"] = data.draw(st.integers(0, 2))
        return args

    def _depends_on(self, data: st.DataObject) -> tuple[int, ...]:
        if not self.model.steps:
            return ()
        return tuple(sorted(data.draw(st.sets(st.integers(0, len(self.model.steps) - 1), max_size=2))))

    @rule(tool=st.sampled_from(TOOLS), outcome=st.sampled_from(("succeeded", "succeeded", "failed", "uncertain",
                                                                   "intended")), data=st.data())
    def record(self, tool: str, outcome: str, data: st.DataObject) -> None:
        """Record a call that succeeds, fails, times out, or whose caller crashes before it reports."""
        args, depends_on = self._args(tool, data), self._depends_on(data)
        expected = self.model.record(tool, args, depends_on, outcome)

        def effect(**called: Any) -> Any:
            if outcome == "failed":
                raise ValueError("the caller's own error, before the call")
            result = self.witness.forward(tool, called)
            if outcome == "uncertain":
                raise TimeoutError("no answer in time")
            return result

        got: str | int
        try:
            if outcome == "intended":
                got = self.run.begin(tool, args, depends_on).index  # and never reported: a crash
            else:
                self.run.call(tool, args, effect, depends_on)
                got = len(self.model.steps) - 1
        except reversi.errors.Refused as exc:
            got = type(exc).__name__
        except Exception:
            got = len(self.model.steps) - 1  # the call's own failure, journaled
        assert got == expected

    # -- operating -------------------------------------------------------------------------------

    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        """An operator settles a step as the downstream says it went (refused unless it is unresolved)."""
        if not self.model.steps:
            return
        index = data.draw(st.integers(0, len(self.model.steps) - 1))
        op = self.model.steps[index].args["op"]
        status = "succeeded" if op in self.model.created else "failed"
        expected = self.model.resolve(index)
        found = {"result": {"id": op}} if status == "succeeded" else {}
        assert self._error(lambda: self.run.resolve(index, status, note="checked downstream", actor="sm-op",
                                                    **found)) == expected

    @rule(scope=st.sampled_from(SCOPES))
    def halt(self, scope: dict[str, str]) -> None:
        """A halt, scoped or not; only the calls it matches are refused."""
        self.ledger.add_halt("the state machine halts", by="sm-op", **scope)
        self.model.halts.append(Halt(dict(scope)))

    @rule(on=st.booleans())
    def kill_switch(self, on: bool) -> None:
        """The kill file: while it exists every new call is refused."""
        if on:
            self.kill_file.write_text("the state machine pulled it")
        else:
            self.kill_file.unlink(missing_ok=True)
        self.model.kill_file = on

    @rule()
    def resume(self) -> None:
        assert self.ledger.lift_halts(by="sm-op") == len(self.model.halts)
        self.model.halts.clear()

    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data: st.DataObject, approve: bool) -> None:
        """Approve or deny an approval (forward or compensation) the run asked for."""
        if not self.model.approvals:
            return
        index = data.draw(st.integers(0, len(self.model.approvals) - 1))
        approval_id = self._approvals()[index].approval_id
        expected = self.model.decide(index, approve)
        if approve:
            assert self._error(lambda: self.ledger.approve(approval_id, by="sm-op")) == expected
        else:
            assert self._error(lambda: self.ledger.deny(approval_id, "not now", by="sm-op")) == expected

    @rule(approve=st.booleans(), attempts=st.sampled_from((1, 2)),
          crash=st.one_of(st.none(), st.tuples(st.integers(1, 3), st.booleans())))
    def rollback(self, approve: bool, attempts: int, crash: tuple[int, bool] | None) -> None:
        """Roll back; with `crash`, the n-th compensation call dies before or after the downstream applied it."""
        crash_at, after = crash if crash is not None else (None, False)
        try:
            expected: Report | None = self.model.rollback(approve, attempts, crash_at, after)
        except Crashed:
            expected = None
        calls = itertools.count(1)

        def compensate(call: dict[str, Any]) -> Any:
            n = next(calls)
            if n == crash_at and not after:
                raise Crash()
            result = self.witness_undo(call)
            if n == crash_at:
                raise Crash()
            return result

        try:
            report = self.run.rollback(compensate=compensate, verifier=self.witness.read,
                                       retry=reversi.Retry(attempts=attempts, base_ms=0, max_ms=0),
                                       approve_compensations=approve, actor="sm-op").to_dict()
        except Crash:
            assert expected is None, "the rollback crashed where the model did not"
            return
        assert expected is not None, f"the model crashed where the rollback did not: {report}"
        assert _shape(report) == expected

    @rule()
    def abandon_rollback(self) -> None:
        """A rollback cancelled as it starts (while it takes the run's lock, off the event loop): it does
        nothing, and leaves the run free for the next one."""

        async def cancelled() -> None:
            started = asyncio.ensure_future(self.run.arollback(compensate=self.witness_undo))
            await asyncio.sleep(0)
            started.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await started

        asyncio.run(cancelled())

    def witness_undo(self, call: dict[str, Any]) -> Any:
        return self.witness.compensate(call["tool"], call["args"], call["idempotency_key"], call, "sdk")

    @rule()
    def reopen(self) -> None:
        """Close the ledger, whatever was left half done, and open the store again."""
        self.ledger.close()
        self.ledger = self._open()
        self.run = self.ledger.get_run(self.run.id)

    # -- what must agree -------------------------------------------------------------------------

    def _approvals(self) -> list[reversi.Approval]:
        return sorted(self.ledger.approvals(run_id=self.run.id), key=lambda a: (a.requested_at, a.approval_id))

    def _error(self, action: Any) -> str | None:
        try:
            action()
        except ReversiError as exc:
            return type(exc).__name__
        return None

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert [s.status.value for s in self.run.steps()] == [s.status for s in self.model.steps]
        assert [(a.kind.value, a.status.value, a.used) for a in self._approvals()] == [
            (a.kind, a.status, a.used) for a in self.model.approvals]
        assert len(self.ledger.halts()) == len(self.model.halts)
        assert sum(e.type == "refused" for e in self.run.events()) == self.model.refused
        plan = [(a.step, a.kind.value, tuple(a.blocked_by)) for a in self.run.plan().actions]
        assert plan == self.model.plan()

    def teardown(self) -> None:
        self.ledger.lift_halts(by="sm-op")
        self.ledger.close()
        self.witness.close()
        assert check(self.url, self.directory) == []


def _shape(report: Mapping[str, Any]) -> Report:
    """The engine's report in the model's terms."""
    return Report(
        compensated=report["compensated"], skipped=report["skipped"], unresolved=report["unresolved"],
        unmanifested=report["unmanifested"], failed=[(f["step"], f["attempts"]) for f in report["failed"]],
        unrecoverable=[u["step"] for u in report["unrecoverable"]],
        deferred=[(d["step"], tuple(d["blocked_by"])) for d in report["deferred"]],
        awaiting=[(a["step"], a["status"]) for a in report["awaiting_approval"]],
    )


def test_the_engine_does_what_the_reference_model_says_through_crashes_and_reopens(
    db_url: str, tmp_path: Path
) -> None:
    machine = type("Machine", (RunMachine,), {"url": db_url, "root": tmp_path})
    run_state_machine_as_test(machine, settings=ci_settings())


"""Crash safety: SIGKILL a recording or a rollback at every journal point, then pick up the pieces.

The child (`child.py`) announces each write transaction of the store just before its COMMIT and
just after, and stops at the point the test asks for; the test SIGKILLs it there. The downstream
system (`compensator.py`) applies each undo at most once per idempotency key, as a well-behaved
API does, and logs every call and every real application, so the tests can check that Reversi
never executes a compensation twice for one success, never calls a step it journaled as
compensated again, and never loses a step.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shlex
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.core.plan import compensation_key
from reversi.engine.commands import command_compensator, command_read_back
from reversi.errors import NotFound, RollbackInProgress

Spawn = Callable[..., Any]
HERE = Path(__file__).parent
PY = shlex.quote(sys.executable)
WAIT_S = 30.0


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Downstream:
    """The state of `compensator.py`: every call it got, and every undo it really applied."""

    def __init__(self, state: Path) -> None:
        self.state = state
        state.mkdir()

    def command(self, phase: str, *extra: str) -> str:
        args = [str(HERE / "compensator.py"), str(self.state), "--phase", phase, *extra]
        return " ".join([PY, *(shlex.quote(a) for a in args)])

    def calls(self, phase: str | None = None) -> list[dict[str, Any]]:
        return [c for c in read_jsonl(self.state / "calls.log") if phase is None or c["phase"] == phase]

    def applied(self) -> Counter[str]:
        return Counter(a["key"] for a in read_jsonl(self.state / "applied.log"))

    def reader(self, key: str, undone: Any, standing: Any) -> str:
        """A read-back command whose `stripe.get_payment_intent` answers `undone` once the undo with
        `key` was applied here, else `standing`: the world as it is, not as a test assumes it."""
        answers = self.state / "answers.json"
        answers.write_text(json.dumps({"stripe.get_payment_intent": {
            "applied": str(self.state / "effects" / key), "then": undone, "else": standing}}))
        args = [str(HERE / "reader.py"), str(answers), str(self.state / "reader.log")]
        return " ".join([PY, *(shlex.quote(a) for a in args)])


def run_until_stopped(child: Any) -> tuple[list[str], bool]:
    """The points the child announced, and whether it stopped (False: it finished)."""
    points = []
    while True:
        line = child.line()
        if line is None or line.startswith("error") or line.startswith("crash"):
            pytest.fail(f"the child failed: {child.said}{child._stderr()}")
        if line.startswith("point "):
            points.append(line)
        elif line == "stopped":
            child.kill()
            return points, True
        elif line.startswith("done"):
            assert child.finish() == 0
            return points, False


def assert_journal_is_whole(run: reversi.Run) -> None:
    """seq without gaps; steps 0..n-1, each opened by exactly one `intended`; every outcome after it."""
    events = run.events()
    assert [e.seq for e in events] == list(range(len(events)))
    steps = run.steps()
    assert [s.index for s in steps] == list(range(len(steps)))
    for step in steps:
        mine = [e.type for e in events if e.step == step.index and not e.type.startswith("approval")]
        assert mine[0] == "intended" and mine.count("intended") == 1, mine


# -- recording ------------------------------------------------------------------------------------


def test_a_recording_killed_at_any_journal_point_leaves_every_call_journaled_before_it_ran(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn, tmp_path: Path
) -> None:
    announced: list[str] = []
    for stop_at in itertools.count():
        run_id = f"run_rec{stop_at}"
        effects = tmp_path / f"effects-{stop_at}.log"
        child = spawn("record", manifest=str(manifest), run_id=run_id, stop_at=stop_at, effects=str(effects))
        points, stopped = run_until_stopped(child)
        called = {e["step"] for e in read_jsonl(effects)}
        try:
            run = ledger.get_run(run_id)
        except NotFound:
            assert stop_at == 0 and called == set(), "killed before the run was opened: nothing happened"
            continue
        where = points[-1] if stopped else "the end"

        assert_journal_is_whole(run)
        steps = run.steps()
        journaled = {s.index for s in steps}
        assert called <= journaled, f"a call ran without `intended` committed (killed at {where})"
        for step in steps:
            if step.status.value in ("succeeded", "failed"):
                assert step.index in called, where
        plan = run.plan()
        assert sorted(a.step for a in plan.actions) == sorted(journaled), "no step lost from the plan"
        for action in plan.actions:
            if steps[action.step].status.value == "intended":
                assert action.kind.value == "unresolved", where

        # The run carries on from a new process: the next call gets the next number, no gap, no twin.
        again = ledger.start_run(run_id)
        assert again.begin("crm.upsert_contact", {"email": "a@b.c"}).index == len(steps)
        assert_journal_is_whole(again)
        announced += points
        if not stopped:
            break

    labels = {" ".join(p.split()[2:]) for p in announced}
    for expected in ["pre run_opened:", "post intended:0", "pre succeeded:0", "post intended:1", "pre failed:1"]:
        assert expected in labels, f"the journal point {expected!r} was never reached: {sorted(labels)}"


# -- rollback -------------------------------------------------------------------------------------


def three_steps(ledger: reversi.Ledger) -> reversi.Run:
    run = ledger.start_run()
    run.begin("stripe.create_charge", {"amount": 100}).succeeded({"id": "ch_0"})
    run.begin("stripe.create_payment_intent", {"amount": 5}).succeeded({"id": "pi_1", "status": "succeeded"})
    run.begin("stripe.create_charge", {"amount": 102}).succeeded({"id": "ch_2"})
    return run


def keys_of(run: reversi.Run) -> dict[int, str]:
    tools = {0: "stripe.refund", 1: "stripe.cancel_payment_intent", 2: "stripe.refund"}
    return {step: compensation_key(run.id, step, tool) for step, tool in tools.items()}


def test_a_rollback_killed_at_any_journal_point_is_finished_by_a_rerun_that_undoes_nothing_twice(
    ledger: reversi.Ledger, manifest: Path, spawn: Spawn, tmp_path: Path
) -> None:
    """The read-back of step 1 reads the downstream's own state: a re-run that finds its undo done
    journals it so, and does not send it again."""
    announced: list[str] = []
    read_first = 0  # kills between step 1's undo taking effect and its journal entry
    for stop_at in itertools.count():
        run = three_steps(ledger)
        keys = keys_of(run)
        downstream = Downstream(tmp_path / f"downstream-{stop_at}")
        reader_cmd = downstream.reader(keys[1], {"id": "pi_1", "status": "canceled"}, {"id": "pi_1", "status": "ok"})
        child = spawn(
            "rollback",
            manifest=str(manifest),
            run_id=run.id,
            stop_at=stop_at,
            # step 2's first call fails, so retries and `compensation_failed` are among the points
            compensator=downstream.command("crash", "--fail-first", "1", "--fail-step", "2"),
            reader=reader_cmd,
            attempts=2,
        )
        points, stopped = run_until_stopped(child)
        where = points[-1] if stopped else "the end"
        undone_before = {s.index for s in run.steps() if s.status.value == "compensated"}
        applied_before = downstream.applied()

        # The lock died with the child: the re-run starts at once, with no RollbackInProgress.
        report = run.rollback(
            compensate=command_compensator(downstream.command("rerun", "--fail-first", "1", "--fail-step", "2")),
            verifier=command_read_back(reader_cmd),
            retry=reversi.Retry(attempts=2, base_ms=0, max_ms=0),
        )

        assert report.complete, (where, report.to_dict())
        assert sorted(report.compensated + report.skipped) == [0, 1, 2], where
        assert set(report.skipped) == undone_before, where
        rerun_keys = {c["key"] for c in downstream.calls("rerun")}
        assert not rerun_keys & {keys[s] for s in undone_before}, f"a compensated step was called again ({where})"
        if keys[1] in applied_before and 1 not in undone_before:  # done, but not journaled so
            assert keys[1] not in rerun_keys, f"an undo its read-back found done was sent again ({where})"
            found = [e.data for e in run.events() if e.step == 1 and e.type in ("verified", "compensated")]
            assert [d.get("found_undone") for d in found] == [True, True], (where, found)
            read_first += 1
        assert downstream.applied() == Counter(keys.values()), f"an undo applied twice or never ({where})"
        assert {c["key"] for c in downstream.calls()} == set(keys.values())
        assert_journal_is_whole(run)
        for step in run.steps():
            types = [e.type for e in run.events() if e.step == step.index]
            assert step.status.value == "compensated" and types.count("compensated") == 1, (where, types)
            assert types.index("compensating") < types.index("compensated")
        announced += points
        if not stopped:
            assert undone_before == {0, 1, 2} and downstream.calls("rerun") == []
            break

    assert read_first > 0, "no kill fell between an undo with a read-back and its `compensated`"
    labels = {" ".join(p.split()[2:]) for p in announced}
    for expected in [
        "pre compensating:2",
        "post compensation_failed:2",
        "post compensated:2",
        "pre verified:1 compensated:1",
        "post compensating:0",
        "pre compensated:0",
    ]:
        assert expected in labels, f"the journal point {expected!r} was never reached: {sorted(labels)}"


@pytest.fixture
def fifos(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """A `ready` FIFO, already open for reading (without blocking), and a `gate` FIFO."""
    ready, gate = tmp_path / "ready.fifo", tmp_path / "gate.fifo"
    os.mkfifo(ready)
    os.mkfifo(gate)
    fd = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    yield ready, gate, fd
    os.close(fd)


def wait_ready(fd: int) -> int:
    """The pid the compensator writes when it reaches its blocking point."""
    readable, _, _ = select.select([fd], [], [], WAIT_S)
    if not readable:
        pytest.fail(f"the compensator did not reach its blocking point in {WAIT_S:g} s")
    return int(os.read(fd, 100).decode().split()[0])


@pytest.mark.parametrize("block", ["before", "after"])
def test_a_rollback_killed_while_its_compensator_runs_is_finished_by_the_next_with_the_same_key(
    ledger: reversi.Ledger,
    manifest: Path,
    spawn: Spawn,
    tmp_path: Path,
    fifos: tuple[Path, Path, int],
    block: str,
) -> None:
    ready, gate, ready_fd = fifos
    run = ledger.start_run()
    run.begin("stripe.create_charge", {"amount": 100}).succeeded({"id": "ch_0"})
    run.begin("stripe.create_charge", {"amount": 101}).succeeded({"id": "ch_1"})
    keys = {s: compensation_key(run.id, s, "stripe.refund") for s in (0, 1)}
    downstream = Downstream(tmp_path / "downstream")
    blocking = downstream.command(
        "crash", "--block", block, "--block-step", "1", "--ready", str(ready), "--gate", str(gate)
    )
    child = spawn("rollback", manifest=str(manifest), run_id=run.id, compensator=blocking)
    orphan = wait_ready(ready_fd)

    try:
        assert [s.status.value for s in run.steps()] == ["succeeded", "compensating"]
        with pytest.raises(RollbackInProgress):
            run.rollback(compensate=command_compensator(downstream.command("blocked")))
        assert downstream.calls("blocked") == []

        child.kill()  # only the rollback: its compensator lives on, orphaned, and must not hold the run
        report = run.rollback(compensate=command_compensator(downstream.command("rerun")))
    finally:
        os.kill(orphan, signal.SIGKILL)

    assert report.compensated == [1, 0] and report.complete
    calls = downstream.calls()
    assert [(c["phase"], c["step"], c["key"]) for c in calls] == [
        ("crash", 1, keys[1]),
        ("rerun", 1, keys[1]),
        ("rerun", 0, keys[0]),
    ]
    assert downstream.applied() == Counter(keys.values())
    step_1 = [e.type for e in run.events() if e.step == 1]
    assert step_1 == ["intended", "succeeded", "compensating", "compensating", "compensated"]
    assert_journal_is_whole(run)


# -- follow-ups -----------------------------------------------------------------------------------

FOLLOW_UPS = """
version: 1
tools:
  email.send:
    irreversible: "an email stays sent"
    follow_up: {title: "Correct the mail to ${args.to}", owner: support}
  stripe.create_charge:
    compensation: {tool: stripe.refund, args: {charge: "$result.id"}}
    follow_up: {title: "Refund ${result.id} by hand", owner: billing}
"""
TELL = (f"{PY} -c \"import sys, pathlib; "
        "pathlib.Path(sys.argv[1]).open('a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))\"")


def test_a_rollback_killed_at_any_journal_point_opens_each_follow_up_once_and_hands_it_on(
    db_url: str, spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a follow-up is one write that checks and appends; handing it to the hook is journaled
    after the hook took it. Killed anywhere, the re-run leaves one follow-up per staying step, each
    handed to the hook (twice at most: when the kill fell between the hook and its journal entry)."""
    manifest = tmp_path / "follow-ups.yaml"
    manifest.write_text(FOLLOW_UPS)
    announced: list[str] = []
    told_twice = 0  # kills between the hook taking them and the journal saying so
    for stop_at in itertools.count():
        told = tmp_path / f"told-{stop_at}.jsonl"
        monkeypatch.setenv("REVERSI_FOLLOW_UP_CMD", f"{TELL} {shlex.quote(str(told))}")  # the child's and ours
        with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
            run = ledger.start_run()
            run.begin("email.send", {"to": "ada@example.com"}).succeeded({"sent": True})  # stays: irreversible
            run.begin("stripe.create_charge", {"amount": 5}).succeeded({"id": "ch_1"})  # stays: its refund fails
            run.begin("stripe.create_charge", {"amount": 6}).succeeded({"id": "ch_2"})  # undone
            downstream = Downstream(tmp_path / f"downstream-{stop_at}")
            fails = ("--fail-first", "99", "--fail-step", "1")
            child = spawn("rollback", manifest=str(manifest), run_id=run.id, stop_at=stop_at,
                          compensator=downstream.command("crash", *fails))
            points, stopped = run_until_stopped(child)
            where = points[-1] if stopped else "the end"

            report = run.rollback(compensate=command_compensator(downstream.command("rerun", *fails)))
            events = run.events()
        opened = sorted(e.step or 0 for e in events if e.type == "follow_up_opened")
        handed = sorted(e.step or 0 for e in events if e.type == "follow_up_handed")
        assert opened == [0, 1] and handed == [0, 1], (where, opened, handed)
        assert sorted(f["step"] for f in report.to_dict()["follow_ups"]) == [0, 1], where
        hook_told = Counter(json.loads(line)["step"] for line in told.read_text().splitlines())
        assert set(hook_told) == {0, 1} and max(hook_told.values()) <= 2, (where, hook_told)
        told_twice += max(hook_told.values()) == 2
        announced += points
        if not stopped:
            assert hook_told == Counter({0: 1, 1: 1})  # not killed: each told once
            break

    assert told_twice > 0, "no kill fell between the hook taking a follow-up and `follow_up_handed`"
    labels = {" ".join(p.split()[2:]) for p in announced}
    for expected in ["pre follow_up_opened:0 follow_up_opened:1", "post follow_up_opened:0 follow_up_opened:1",
                     "pre follow_up_handed:0 follow_up_handed:1"]:
        assert expected in labels, f"the journal point {expected!r} was never reached: {sorted(labels)}"

"""Many processes at once, on both back ends: eight recording processes racing a halt (no call is let
through once the halt has committed), and eight processes rolling back the same fifty runs at once
(each compensation called exactly once)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tests.conftest import Child

import reversi

HERE = Path(__file__).parent
PROCESSES = 8
ROUNDS = 2
RUNS = 50

Start = Callable[..., Child]


@pytest.fixture
def start(db_url: str, tmp_path: Path) -> Iterator[Start]:
    """Start `tests/engine/SCRIPT ARGS...` as a line-talking child; every one is killed at the end."""
    children: list[Child] = []

    def begin(script: str, *args: str) -> Child:
        child = Child([sys.executable, str(HERE / script), *args], tmp_path / f"{script}-{len(children)}.stderr")
        children.append(child)
        return child

    yield begin
    for child in children:
        child.kill()


def when(at: str) -> datetime:
    return datetime.fromisoformat(at)


def test_no_call_is_admitted_after_a_halt_commits_while_eight_processes_record(
    db_url: str, manifest: Path, start: Start
) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        runs = [ledger.start_run() for _ in range(PROCESSES)]
        racers = [start("racer.py", db_url, str(manifest), run.id, str(ROUNDS)) for run in runs]
        for racer in racers:
            racer.expect("ready")
        halts = []
        for _ in range(ROUNDS):
            for racer in racers:
                racer.send("go")
            for racer in racers:
                racer.expect("recording")  # every process is mid-stream when the halt lands
            halt = ledger.add_halt("stop everything", by="test")
            added = time.monotonic()  # the halt has committed
            halts.append(halt)
            reports = [racer.expect("halted ").split() for racer in racers]
            lifted = ledger.lift_halts(halt.halt_id, by="test")
            assert lifted == 1
            for _, admitted, last_admitted, _ in reports:
                assert int(admitted) >= 1
                assert float(last_admitted) < added, "a call that began after the halt's commit was let through"

        with ledger.store.read() as q:
            lifts = [e for e in q.system_events() if e.type == "halt_lifted"]
        windows = [(when(h.created_at), when(lift.at)) for h, lift in zip(halts, lifts, strict=True)]
        for run in runs:
            events = run.events()
            intended = [when(e.at) for e in events if e.type == "intended"]
            late = [at for at in intended for added_at, lifted_at in windows if added_at <= at <= lifted_at]
            assert late == [], f"{run.id}: calls journaled `intended` while a halt was in force"
            refused = [e for e in events if e.type == "refused"]
            assert len(refused) == ROUNDS
            assert {e.data["reason"].split(" (halt ")[0] for e in refused} == {"kill switch: stop everything"}


def test_eight_processes_rolling_back_the_same_fifty_runs_at_once_call_each_compensation_once(
    db_url: str, manifest: Path, start: Start, tmp_path: Path
) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run_ids = []
        for n in range(RUNS):
            run = ledger.start_run()
            run.begin("jobs.start", {"n": n}).succeeded({"id": f"a{n}"})
            run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
            run_ids.append(run.id)
        runs_file = tmp_path / "runs.txt"
        runs_file.write_text("\n".join(run_ids))
        witness = tmp_path / "witness"
        witness.mkdir()
        rollers = [start("roller.py", db_url, str(manifest), str(runs_file), str(witness), str(seed))
                   for seed in range(PROCESSES)]
        for roller in rollers:
            roller.expect("ready")
        for roller in rollers:
            roller.send("go")
        finished = [roller.expect("done ").split() for roller in rollers]

        calls = Counter((witness / "calls.log").read_text().split())
        applied = Counter((witness / "applied.log").read_text().split())
        assert len(calls) == 2 * RUNS and set(calls.values()) == {1}, "a compensation was called twice"
        assert applied == calls
        assert sum(int(busy) for _, _, busy in finished) + sum(int(done) for _, done, _ in finished) == PROCESSES * RUNS
        for run_id in run_ids:
            events = ledger.get_run(run_id).events()
            assert [s.status.value for s in ledger.get_run(run_id).steps()] == ["compensated", "compensated"]
            assert Counter(e.type for e in events if e.type.startswith("compensat")) == Counter(
                {"compensating": 2, "compensated": 2})

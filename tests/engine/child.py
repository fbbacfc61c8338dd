"""A child process for the store and engine tests: `child.py SCENARIO CONFIG_JSON`.

It talks to the test in lines on stdout and waits for `go` on stdin where a scenario must start at
the same moment as its siblings. The `record` and `rollback` scenarios number every journal point
(each write transaction of the store, just before its COMMIT and just after) and print them as
`point N pre|post EVENTS`; at point `stop_at` they say `stopped` and wait on stdin, so that the
test can SIGKILL them exactly there. The instrumentation only observes and pauses: the ledger's
own code runs unchanged.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import reversi
from reversi.engine.commands import command_compensator, command_read_back
from reversi.errors import ReversiError
from reversi.store.base import Store
from reversi.store.factory import open_store
from reversi.store.postgres import PostgresStore
from reversi.store.sqlite import SQLiteStore


def say(text: str) -> None:
    print(text, flush=True)


def wait_for_go() -> None:
    say("ready")
    sys.stdin.readline()


def error_line(exc: BaseException) -> str:
    if isinstance(exc, ReversiError):
        return f"error {exc.code} {exc.message}"
    return f"crash {type(exc).__name__}: {exc}"


def open_ledger(config: dict[str, Any]) -> reversi.Ledger:
    manifests = [config["manifest"]] if config.get("manifest") else []
    return reversi.open(config["db"], manifests=manifests, principal=config.get("principal"))


def instrument(stop_at: int) -> None:
    """Announce each write transaction just before its COMMIT and just after; stop at `stop_at`.

    Both back ends' `write` (and `write_holding_halts`, where a back end has its own) is wrapped at
    class level, before any store is opened, so that every writer (whatever it holds a reference to)
    goes through it.
    """
    counter = itertools.count()

    def point(phase: str, events: list[str]) -> None:
        n = next(counter)
        say(f"point {n} {phase} {' '.join(events)}")
        if n == stop_at:
            say("stopped")
            sys.stdin.readline()  # the test kills us here

    def wrap(original: Callable[[Any], AbstractContextManager[Any]]) -> Callable[[Store], AbstractContextManager[Any]]:
        @contextmanager
        def write(self: Store) -> Iterator[Any]:
            events: list[str] = []
            with original(self) as q:
                append = q.append

                def spy(run_id: str, new: Any) -> Any:
                    events.extend(f"{e.type.value}:{'' if e.step is None else e.step}" for e in new)
                    return append(run_id, new)

                q.append = spy
                yield q
                point("pre", events)
            point("post", events)

        return write

    for cls in (SQLiteStore, PostgresStore):
        cls.write = wrap(cls.write)  # type: ignore[method-assign, assignment]
        if "write_holding_halts" in vars(cls):  # a call's write; elsewhere it goes through `write`
            cls.write_holding_halts = wrap(cls.write_holding_halts)  # type: ignore[method-assign, assignment]


def scenario_open(config: dict[str, Any]) -> None:
    wait_for_go()
    store = open_store(config["db"])
    store.close()
    say("opened")


def scenario_start_run(config: dict[str, Any]) -> None:
    wait_for_go()
    with open_ledger(config) as ledger:
        try:
            run = ledger.start_run(run_id=config["run_id"])
        except Exception as exc:
            say(error_line(exc))
        else:
            say(f"ok {run.id}")


def scenario_record_many(config: dict[str, Any]) -> None:
    with open_ledger(config) as ledger:
        run = ledger.start_run(run_id=config["run_id"])
        wait_for_go()
        for i in range(config["count"]):
            handle = run.begin(config["tool"], {"i": i, "pid": os.getpid()})
            handle.succeeded({"id": f"{os.getpid()}-{i}"})
            say(f"step {handle.index}")
    say("done")


def scenario_begin(config: dict[str, Any]) -> None:
    with open_ledger(config) as ledger:
        run = ledger.start_run(run_id=config["run_id"])
        wait_for_go()
        try:
            handle = run.begin(config["tool"], config["args"])
        except Exception as exc:
            say(error_line(exc))
        else:
            say(f"step {handle.index}")


def scenario_hold_lock(config: dict[str, Any]) -> None:
    store = open_store(config["db"])
    lock = store.lock_run(config["run_id"])
    say("locked")
    sys.stdin.readline()
    lock.release()
    say("released")


def _effect(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def scenario_record(config: dict[str, Any]) -> None:
    """Open a run and make two calls (one succeeds, one fails), announcing every journal point."""
    effects = Path(config["effects"])
    instrument(config["stop_at"])
    with open_ledger(config) as ledger:
        run = ledger.start_run(run_id=config["run_id"], actor="billing-agent")
        first = run.begin("stripe.create_charge", {"amount": 700})
        _effect(effects, {"step": first.index})
        first.succeeded({"id": "ch_1"})
        second = run.begin("github.create_repo", {"name": "x"}, depends_on=[first.index])
        _effect(effects, {"step": second.index})
        second.failed("409: name already taken")
    say("done")


def scenario_rollback(config: dict[str, Any]) -> None:
    instrument(config.get("stop_at", -1))
    with open_ledger(config) as ledger:
        run = ledger.get_run(config["run_id"])
        reader = command_read_back(config["reader"]) if config.get("reader") else None
        report = run.rollback(
            compensate=command_compensator(config["compensator"]),
            verifier=reader,
            retry=reversi.Retry(attempts=config.get("attempts", 1), base_ms=0, max_ms=0),
        )
    say("done " + json.dumps(report.to_dict()))


SCENARIOS: dict[str, Callable[[dict[str, Any]], None]] = {
    "open": scenario_open,
    "start-run": scenario_start_run,
    "record-many": scenario_record_many,
    "begin": scenario_begin,
    "hold-lock": scenario_hold_lock,
    "record": scenario_record,
    "rollback": scenario_rollback,
}


def main() -> int:
    scenario, config = sys.argv[1], json.loads(sys.argv[2])
    try:
        SCENARIOS[scenario](config)
    except Exception as exc:
        traceback.print_exc()
        say(error_line(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

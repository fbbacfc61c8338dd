"""One checker of Reversi's crash-safety invariants, over a store and a witness directory.

    violations = check(store_url, witness_dir)     # [] when every invariant holds

The store is read as plain tables (`journal.RawStore`); each step's status is folded from its raw events
by `reference_fold` here, written from the spec and sharing no code with the engine, then compared with
what the engine derives. The witness directory holds what the world saw (`witness.jsonl`, written by
`witness.py` as each call arrived), what the processes under test acknowledged (`acks.jsonl`) and the
rollback reports they handed out (`reports.jsonl`); the store's rollback jobs add their reports. Runs
the witness never heard of are held to the journal's own invariants only.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.reliability.journal import RawEvent, RawStore
from tests.reliability.world import ACKS, REPORTS, WITNESS_LOG, read_lines

import reversi

INVARIANTS = {
    "journal-before-call": "every call the downstream saw was journaled `intended` (committed) before it arrived",
    "journal-before-undo": "every compensation the downstream saw had a `compensating` of its own committed first",
    "undone-twice": "no effect was undone twice (one key, or two keys for one effect)",
    "wrong-key": "every compensation carried its step's key, SHA-256 of `run:step:tool`",
    "phantom-undo": "no compensation undid an effect the downstream never saw take place",
    "bad-sequence": "every run's and step's events follow the spec's order",
    "status-mismatch": "the engine derives each step's status as a plain fold of its events does",
    "false-report": "nothing is reported or journaled compensated that the downstream did not see undone",
    "false-failure": "nothing is journaled failed that the downstream saw take effect",
    "lost": "nothing acknowledged as journaled, or seen committed by the witness, is missing",
}

STANDING = ("succeeded", "compensating", "compensation_failed")
UNRESOLVED = ("intended", "uncertain")
UNDONE = ("applied", "repeat", "again")


@dataclass(frozen=True)
class Violation:
    """One broken invariant (`kind`, a key of INVARIANTS), where, and what was found."""

    kind: str
    detail: str
    run_id: str | None = None
    step: int | None = None

    def __str__(self) -> str:
        where = "" if self.run_id is None else f" {self.run_id}" + ("" if self.step is None else f" step {self.step}")
        return f"{self.kind}{where}: {self.detail}"


def compensation_key(run_id: str, step: int, tool: str) -> str:
    """The spec's compensation idempotency key (SPEC §4), computed here from its definition."""
    return hashlib.sha256(f"{run_id}:{step}:{tool}".encode()).hexdigest()


def reference_fold(events: Iterable[RawEvent]) -> tuple[str | None, list[str]]:
    """A step's status from its events in `seq` order, and every event that could not happen where it is."""
    status: str | None = None
    by_hand = False  # the status was set by a `resolved`, which a correction may follow
    problems = []
    for ev in events:
        t, new, ok = ev.type, status, False
        if t == "intended":
            ok, new = status is None, "intended"
        elif t in ("succeeded", "failed", "uncertain"):
            ok, new = status == "intended", t
        elif t == "resolved":
            new = ev.data.get("status")
            ok = (status in UNRESOLVED or (by_hand and ev.data.get("correction") is True)) \
                and new in ("succeeded", "failed")
        elif t == "compensating":
            ok, new = status in STANDING, t
        elif t in ("compensated", "compensation_failed"):
            ok, new = status == "compensating", t
        elif t in ("verified", "verification_failed", "unverified"):
            ok = status == "compensating"
        elif t.startswith("approval_"):
            ok = status is not None
        if not ok:
            problems.append(f"seq {ev.seq}: {t} after {status or 'nothing'}")
        if t in ("resolved", "intended", "succeeded", "failed", "uncertain", "compensating", "compensated",
                 "compensation_failed"):  # the events that set a status
            by_hand = t == "resolved"
        status = new  # as the events say, right or wrong: the wrong one is reported above
    return status, problems


def _at_ns(at: str) -> int:
    moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


class _Journal:
    """The store's events, grouped, with each step's reference status."""

    def __init__(self, events: list[RawEvent], steps: list[tuple[str, int, str]]) -> None:
        self.by_run: dict[str, list[RawEvent]] = defaultdict(list)
        self.by_step: dict[tuple[str, int], list[RawEvent]] = defaultdict(list)
        for ev in events:
            self.by_run[ev.run_id].append(ev)
            if ev.step is not None:
                self.by_step[(ev.run_id, ev.step)].append(ev)
        self.tools = {(run, step): tool for run, step, tool in steps}
        self.status: dict[tuple[str, int], str | None] = {}
        self.problems: dict[tuple[str, int], list[str]] = {}
        for where in set(self.tools) | set(self.by_step):
            self.status[where], self.problems[where] = reference_fold(self.by_step.get(where, []))
        self.by_op: dict[str, tuple[str, int]] = {}
        for ev in events:
            if ev.type == "intended" and ev.step is not None:
                op = (ev.data.get("args") or {}).get("op")
                if isinstance(op, str):
                    self.by_op[op] = (ev.run_id, ev.step)

    def has(self, run_id: str, seq: int, type_: str) -> bool:
        return any(e.seq == seq and e.type == type_ for e in self.by_run.get(run_id, ()))


def check(store_url: str, witness_dir: Path | str) -> list[Violation]:
    """Every violation of the invariants (INVARIANTS) found in the store and the witness directory."""
    directory = Path(witness_dir)
    with RawStore(store_url) as raw:
        journal = _Journal(raw.events(), raw.steps())
        runs = raw.run_ids()
        job_reports = [report for _, _, report in raw.job_reports()]
    seen = read_lines(directory / WITNESS_LOG)
    found = _sequences(journal, runs)
    found += _engine_agrees(store_url, journal, runs)
    found += _calls(journal, seen)
    found += _undos(journal, seen)
    witnessed = {r["run_id"] for r in seen if r.get("kind") == "compensate" and r.get("run_id")}
    witnessed |= {r["journaled"]["run_id"] for r in seen if r.get("kind") == "forward" and r.get("journaled")}
    reports = [r["report"] for r in read_lines(directory / REPORTS)] + job_reports
    found += _reports(journal, seen, reports, witnessed)
    found += _acks(journal, read_lines(directory / ACKS))
    return found


def _sequences(journal: _Journal, runs: list[str]) -> list[Violation]:
    found = []
    for run_id in runs:
        events = journal.by_run.get(run_id, [])
        if [e.seq for e in events] != list(range(len(events))):
            found.append(Violation("bad-sequence", f"seq is not 0..{len(events) - 1} without gaps", run_id))
        if not events or events[0].type != "run_opened":
            found.append(Violation("bad-sequence", "the first event is not run_opened", run_id))
        numbers = sorted(step for run, step in journal.tools if run == run_id)
        if numbers != list(range(len(numbers))):
            found.append(Violation("bad-sequence", f"steps are numbered {numbers}", run_id))
    for (run_id, step), problems in sorted(journal.problems.items()):
        if (run_id, step) not in journal.tools:
            found.append(Violation("bad-sequence", "events of a step that is not in the steps table", run_id, step))
        found += [Violation("bad-sequence", problem, run_id, step) for problem in problems]
        if journal.status[(run_id, step)] is None and not problems:
            found.append(Violation("bad-sequence", "a step without an intended event", run_id, step))
    return found


def _engine_agrees(store_url: str, journal: _Journal, runs: list[str]) -> list[Violation]:
    """The engine's statuses (each step's fold, and the listing's counts, read another way) against ours."""
    found = []
    with reversi.open(store_url) as ledger:
        for run_id in runs:
            for state in ledger.get_run(run_id).steps():
                expected = journal.status.get((run_id, state.index))
                if state.status.value != expected:
                    found.append(Violation("status-mismatch", f"the engine says {state.status.value}, "
                                           f"the events say {expected}", run_id, state.index))
        for summary in ledger.list_runs():
            run_id = summary.run.run_id
            mine = [s for (run, _), s in journal.status.items() if run == run_id]
            counts = (len(mine), sum(s in STANDING for s in mine), sum(s in UNRESOLVED for s in mine))
            if (summary.steps, summary.standing, summary.unresolved) != counts:
                found.append(Violation("status-mismatch", f"the run listing counts (steps, standing, unresolved) "
                                       f"{(summary.steps, summary.standing, summary.unresolved)}, the events {counts}",
                                       run_id))
    return found


def _calls(journal: _Journal, seen: list[dict[str, Any]]) -> list[Violation]:
    """Forward calls: journaled before they arrived, still journaled, and never called failed if they acted."""
    found = []
    for record in (r for r in seen if r.get("kind") == "forward"):
        op, where = record.get("op"), record.get("journaled")
        if where is None:
            found.append(Violation("journal-before-call", f"{record['tool']} {op} arrived (witness #{record['n']}) "
                                   "with no intended event committed"))
            continue
        run_id, step = where["run_id"], where["step"]
        if not journal.has(run_id, where["seq"], "intended"):
            found.append(Violation("lost", f"the intended event seq {where['seq']} the witness saw is gone",
                                   run_id, step))
        elif _at_ns(where["at"]) > record["t"]:
            found.append(Violation("journal-before-call", "the intended event is dated after the call", run_id, step))
        if record.get("effect") and journal.status.get((run_id, step)) == "failed":
            found.append(Violation("false-failure", f"journaled failed, but {record['tool']} {op} took effect",
                                   run_id, step))
    return found


def _undos(journal: _Journal, seen: list[dict[str, Any]]) -> list[Violation]:
    """Compensations: each after a `compensating` of its own, with the spec's key, once per effect."""
    found = []
    compensating: dict[str, int] = defaultdict(int)
    for events in journal.by_step.values():
        for ev in events:
            if ev.type == "compensating" and isinstance(ev.data.get("idempotency_key"), str):
                compensating[ev.data["idempotency_key"]] += 1
    undone: dict[str, list[str]] = defaultdict(list)
    for record in (r for r in seen if r.get("kind") == "compensate"):
        key, run_id, step = record.get("key"), record.get("run_id"), record.get("step")
        what = (f"{record['tool']} of {record.get('target')} "
                f"(witness #{record['n']}, call {record['call_no']} of its key)")
        if record["journaled"] < record["call_no"]:
            found.append(Violation("journal-before-undo", f"{what} arrived with {record['journaled']} compensating "
                                   "events committed", run_id, step))
        if key is not None and compensating[key] < record["journaled"]:
            found.append(Violation("lost", f"{what}: the witness saw {record['journaled']} compensating events, "
                                   f"the journal has {compensating[key]}", run_id, step))
        if key is None or run_id is None or step is None or key != compensation_key(run_id, step, record["tool"]):
            found.append(Violation("wrong-key", f"{what} carried key {key!r}", run_id, step))
        if record["outcome"] == "missing":
            found.append(Violation("phantom-undo", f"{what}: {record.get('error')}", run_id, step))
        if record["outcome"] in ("applied", "again"):
            undone[str(record.get("target"))].append(what)
    for target, undos in undone.items():
        if len(undos) > 1:
            found.append(Violation("undone-twice", f"{target} undone {len(undos)} times: {'; '.join(undos)}"))
    return found


def _reports(journal: _Journal, seen: list[dict[str, Any]], reports: list[dict[str, Any]],
             witnessed: set[str]) -> list[Violation]:
    """No report, and no journal, claims an undo the witness did not see."""
    found = []
    undone = {(r.get("run_id"), r.get("step")) for r in seen
              if r.get("kind") == "compensate" and r.get("outcome") in UNDONE}
    for report in reports:
        run_id = report.get("run_id")
        if run_id not in witnessed:
            continue
        for step in report.get("compensated", []):
            if (run_id, step) not in undone:
                found.append(Violation("false-report", "reported compensated; the witness saw no undo", run_id, step))
    for (run_id, step), status in sorted(journal.status.items()):
        if status == "compensated" and run_id in witnessed and (run_id, step) not in undone:
            found.append(Violation("false-report", "journaled compensated; the witness saw no undo", run_id, step))
    return found


def _acks(journal: _Journal, acks: list[dict[str, Any]]) -> list[Violation]:
    """Whatever a process under test said was journaled (an event of `type`, or of one of the types it lists,
    of step `step`, or of the call `op`) is there."""
    found = []
    for ack in acks:
        run_id, step = str(ack.get("run_id")), ack.get("step")
        if step is None and ack.get("op") in journal.by_op:
            run_id, step = journal.by_op[ack["op"]]
        events = journal.by_step.get((run_id, int(step)), []) if step is not None else []
        types = ack["type"] if isinstance(ack["type"], list) else [ack["type"]]
        if not any(e.type in types for e in events):
            what = f"step {step}" if step is not None else f"the call {ack.get('op')}"
            found.append(Violation("lost", f"{ack.get('by', 'a process')} acknowledged {' or '.join(types)} of {what}; "
                                   "the journal does not have it", run_id, step))
    return found

"""Undo windows in a rollback, on both stores: a step whose window closed is reported unrecoverable
with the moment, and is never called; a window that closes while the rollback runs stops that undo.
The clock is the test's: each undo moves it on, nothing sleeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import reversi
from reversi.core.times import format_time

MANIFEST = """
version: 1
tools:
  bank.transfer:
    undo_until: "$result.recallable_until"
    compensation: {tool: bank.recall, args: {id: "$result.id"}}
"""
T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_a_window_that_closes_while_the_rollback_runs_stops_that_undo(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    now = [T]
    called: list[Any] = []

    def recall(call: dict[str, Any]) -> dict[str, Any]:
        called.append(call["args"]["id"])
        now[0] += timedelta(minutes=10)  # each recall takes ten minutes of the test's clock
        return {"recalled": call["args"]["id"]}

    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        for name, closes in (("tr_old", T + timedelta(minutes=5)), ("tr_new", T + timedelta(hours=1)),
                             ("tr_gone", T - timedelta(minutes=1))):
            run.begin("bank.transfer", {"to": name}).succeeded({"id": name, "recallable_until": format_time(closes)})
        plan = run.plan(now=T)
        assert [(a.step, a.kind.value) for a in plan.actions] == [(2, "unrecoverable"), (1, "compensate"),
                                                                  (0, "compensate")]
        report = run.rollback(recall, clock=lambda: now[0])

        assert called == ["tr_new"]  # tr_old closed at 12:05, while tr_new's recall ran until 12:10
        assert report.compensated == [1] and not report.complete
        assert [(u.step, u.reason) for u in report.unrecoverable] == [
            (2, "the undo window closed at 2030-01-01T11:59:00.000000Z"),
            (0, "the undo window closed at 2030-01-01T12:05:00.000000Z")]
        assert [s.status.value for s in run.steps()] == ["succeeded", "compensated", "succeeded"]
        assert not [e for e in run.events() if e.step in (0, 2) and e.type.startswith("compensat")]


READ_BACK = MANIFEST + """    verification:
      {tool: bank.get_transfer, args: {id: "$result.id"}, expect: {status: recalled}}
"""


def test_an_undo_interrupted_before_its_window_closed_is_read_back_before_it_is_given_up(
    db_url: str, tmp_path: Path
) -> None:
    """A crash between the recall and its journal entry, and the re-run comes after the window closed:
    the read-back decides, not the clock."""
    from reversi.core.models import EventType, NewEvent
    from reversi.core.plan import compensation_key

    (tmp_path / "tools.yaml").write_text(READ_BACK)
    sent: list[Any] = []
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        for recalled in (True, False):
            run = ledger.start_run()
            run.begin("bank.transfer", {}).succeeded({"id": "tr", "recallable_until": format_time(T)})
            with ledger.store.write() as q:  # what the interrupted rollback left: `compensating`, no outcome
                q.append(run.id, [NewEvent(EventType.COMPENSATING, 0, "ops", {
                    "tool": "bank.recall", "args": {"id": "tr"}, "attempt": 1,
                    "idempotency_key": compensation_key(run.id, 0, "bank.recall")})])
            answer = {"status": "recalled" if recalled else "sent"}

            def read(tool: str, args: Any, answer: dict[str, str] = answer) -> dict[str, str]:
                return answer

            report = run.rollback(sent.append, verifier=read, clock=lambda: T + timedelta(hours=1))
            if recalled:
                assert report.compensated == [0] and report.complete
            else:
                assert [(u.step, u.reason) for u in report.unrecoverable] == [
                    (0, "the undo window closed at 2030-01-01T12:00:00.000000Z")]
    assert sent == []  # neither was sent again: one was found undone, the other's window had closed

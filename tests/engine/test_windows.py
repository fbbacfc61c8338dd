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

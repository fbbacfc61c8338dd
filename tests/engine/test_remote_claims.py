"""Remote claims: a report is heard only from the claim the step is under now.

Two gaps beside tests/engine/test_remote.py: a worker that claims the same step again under the same
name (restarted, say) holds a new claim, which its old handle does not stand for; and a late report
that arrives while a rollback is making the undo is refused, so the step is compensated once.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.engine.test_remote import charge, types

import reversi
from reversi.errors import NotCompensable


def test_a_workers_handle_from_before_it_claimed_the_step_again_cannot_report(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    before = run.begin_compensation(0, lease_s=1e-6, worker="w1")  # expired by the time anyone looks
    again = run.begin_compensation(0, lease_s=60, worker="w1")
    assert again.worker == before.worker and again.claim_until != before.claim_until

    with pytest.raises(NotCompensable, match=f"no longer under this claim: it is under w1's claim until "
                                             f"{again.claim_until}"):
        run.complete_compensation(before, ok=True)
    assert types(run, 0) == ["intended", "succeeded", "compensating", "compensating"]
    assert run.complete_compensation(again, ok=True).value == "compensated"
    assert types(run, 0).count("compensated") == 1


def test_a_late_report_while_a_rollback_makes_the_undo_is_refused(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    late = run.begin_compensation(0, lease_s=1e-6, worker="slow")
    heard: list[Any] = []

    def undo(call: dict[str, Any]) -> Any:
        # the rollback has journaled its `compensating`: the step is the rollback's now
        try:
            heard.append(ledger.get_run(run.id).complete_compensation(late, ok=True))
        except NotCompensable as refused:
            heard.append(refused)
        return {"ok": True}

    report = run.rollback(compensate=undo)

    [refused] = heard
    assert isinstance(refused, NotCompensable), refused
    assert "is no longer under this claim: it is under a rollback" in str(refused)
    assert report.compensated == [0] and report.complete
    assert types(run, 0) == ["intended", "succeeded", "compensating", "compensating", "compensated"]

"""The rollback report's verdict: `complete` only when nothing is left standing, waiting or unchecked.

The seed's rule: `complete` is true only if `failed`, `unrecoverable`, `unresolved`, `unmanifested`,
`deferred`, `awaiting_approval` and `unverified` are all empty. An undo that was made but not read back
(`unverified`) is the one of them that still counts as compensated, so it is the easiest to let through.
"""

from __future__ import annotations

from typing import Any

import pytest

from reversi.core.report import AwaitingApproval, Deferred, Failure, RollbackReport, Unrecoverable

BLOCKING: dict[str, Any] = {
    "failed": Failure(3, "downstream said 503", 1),
    "unrecoverable": Unrecoverable(3, "the undo window closed"),
    "unresolved": 3,
    "unmanifested": 3,
    "deferred": Deferred(3, (4,)),
    "awaiting_approval": AwaitingApproval(3, "apr_1", "pending"),
    "unverified": 3,
}


def report(**lists: Any) -> RollbackReport:
    return RollbackReport("run_1", **lists)


@pytest.mark.parametrize("field", sorted(BLOCKING))
def test_each_kind_of_step_left_over_makes_the_report_incomplete(field: str) -> None:
    # beside undone steps, as a real report has them: the leftover alone decides
    left = report(compensated=[5, 4, 3], skipped=[2], already_undone=[2], **{field: [BLOCKING[field]]})
    assert not left.complete
    assert left.to_dict()["complete"] is False
    assert left.to_text().endswith("rollback INCOMPLETE")


def test_an_undo_made_but_not_read_back_is_compensated_and_still_not_complete() -> None:
    unchecked = report(compensated=[1, 0], unverified=[0])
    assert not unchecked.complete and not unchecked.settled  # nobody took care of it: it is unknown
    assert unchecked.to_dict()["unverified"] == [0] and unchecked.to_dict()["complete"] is False
    text = unchecked.to_text("pass the reader")
    assert "undone but not verified (declared read-back not run; pass the reader): 0" in text.splitlines()
    assert text.endswith("rollback INCOMPLETE")
    assert not unchecked.staying  # it stays in no one's hands: its undo was made


def test_a_report_with_only_undone_and_skipped_steps_is_complete() -> None:
    for done in (report(), report(compensated=[2, 1]), report(skipped=[0], already_undone=[0]),
                 report(compensated=[1], skipped=[0])):
        assert done.complete and done.to_dict()["complete"] is True
        assert done.to_text().endswith("rollback complete")

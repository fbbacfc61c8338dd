"""A step keeps the approval rule it ran under, judged on its own arguments when it ran.

The rule here depends on the call (`$args.amount` over 1000): what a step keeps, once the entry is
edited, is the rule's answer for that step, not the rule's existence. A large transfer keeps needing
an approval after the condition is lifted, a small one keeps needing none after it is made unconditional.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import reversi

ENTRY = """\
version: 1
tools:
  bank.transfer:
    compensation:
      tool: bank.reverse_transfer
      args: {{transfer: "$result.id"}}
      requires_approval: {rule}
"""
CONDITIONAL = ENTRY.format(rule='{"$args.amount": {$gt: 1000}}')
LIFTED = ENTRY.format(rule="false")
ALWAYS = ENTRY.format(rule="true")


@contextmanager
def ledger_with(db_url: str, path: Path, manifest: str) -> Iterator[reversi.Ledger]:
    path.write_text(manifest)
    with reversi.open(db_url, manifests=[str(path)]) as ledger:
        yield ledger


def needs(run: reversi.Run) -> dict[int, bool]:
    return {a.step: a.compensation.needs_approval for a in run.plan().actions if a.compensation is not None}


class Undo:
    def __init__(self) -> None:
        self.steps: list[int] = []

    def __call__(self, call: dict[str, Any]) -> Any:
        self.steps.append(call["step"])
        return {"ok": True}


def test_each_step_keeps_what_the_conditional_rule_said_for_its_own_arguments(db_url: str, tmp_path: Path) -> None:
    with ledger_with(db_url, tmp_path / "conditional.yaml", CONDITIONAL) as ledger:
        runs = []
        for _ in range(2):
            run = ledger.start_run()
            for n, amount in enumerate((5000, 5)):
                run.begin("bank.transfer", {"amount": amount}).succeeded({"id": f"tr_{n}"})
            runs.append(run.id)
        assert needs(ledger.get_run(runs[0])) == {0: True, 1: False}  # the entry as it ran: judged per call

    with ledger_with(db_url, tmp_path / "lifted.yaml", LIFTED) as edited:  # the condition lifted since
        assert needs(edited.get_run(runs[0])) == {0: True, 1: False}
        undo = Undo()
        report = edited.get_run(runs[0]).rollback(compensate=undo)
        assert report.compensated == [1] and [w.step for w in report.awaiting_approval] == [0]
        assert undo.steps == [1]

    with ledger_with(db_url, tmp_path / "always.yaml", ALWAYS) as edited:  # made unconditional since
        assert needs(edited.get_run(runs[1])) == {0: True, 1: False}
        undo = Undo()
        report = edited.get_run(runs[1]).rollback(compensate=undo)
        assert report.compensated == [1] and [w.step for w in report.awaiting_approval] == [0]
        assert undo.steps == [1]

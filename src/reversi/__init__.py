"""Reversi: journal every side-effecting call an agent makes, and roll a run back on demand.

import reversi

with reversi.open(manifests=["tools.yaml"]) as ledger:
    run = ledger.start_run(actor="billing-agent")
    charge = run.call("stripe.create_charge", {"amount": 700}, create_charge)
    print(run.plan().to_text())
    report = run.rollback(compensate=undo)
"""

from reversi import errors
from reversi.core.backoff import Retry
from reversi.core.plan import Action, ActionKind, Plan
from reversi.core.report import RollbackReport
from reversi.engine.ledger import Ledger, RunFilter, open
from reversi.engine.remote import CompensationWork
from reversi.engine.run import Outcome, Run, StepHandle

__all__ = [
    "Action",
    "ActionKind",
    "CompensationWork",
    "Ledger",
    "Outcome",
    "Plan",
    "Retry",
    "RollbackReport",
    "Run",
    "RunFilter",
    "StepHandle",
    "errors",
    "open",
]

"""Reversi: journal every side-effecting call an agent makes, and roll a run back on demand.

    import reversi

    with reversi.open(manifests=["tools.yaml"]) as ledger:
        run = ledger.start_run(actor="billing-agent")
        charge = run.call("stripe.create_charge", {"amount": 700}, create_charge)
        print(run.plan().to_text())
        report = run.rollback(compensate=undo)

The names below are loaded on first use, so `import reversi` (and `reversi --help`) stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reversi import errors

if TYPE_CHECKING:
    from reversi.core.backoff import Retry
    from reversi.core.checkpoints import Checkpoint
    from reversi.core.plan import Action, ActionKind, Plan
    from reversi.core.report import RollbackReport
    from reversi.core.scopes import ScopePlan, ScopeReport, Selection
    from reversi.engine.async_ledger import AsyncLedger, open_async
    from reversi.engine.ledger import Ledger, RunFilter, open
    from reversi.engine.remote import CompensationWork
    from reversi.engine.run import Outcome, Run
    from reversi.engine.step_handle import StepHandle

_HOMES = {
    "Action": "reversi.core.plan",
    "ActionKind": "reversi.core.plan",
    "AsyncLedger": "reversi.engine.async_ledger",
    "Checkpoint": "reversi.core.checkpoints",
    "CompensationWork": "reversi.engine.remote",
    "Ledger": "reversi.engine.ledger",
    "Outcome": "reversi.engine.run",
    "Plan": "reversi.core.plan",
    "Retry": "reversi.core.backoff",
    "RollbackReport": "reversi.core.report",
    "Run": "reversi.engine.run",
    "RunFilter": "reversi.engine.ledger",
    "ScopePlan": "reversi.core.scopes",
    "ScopeReport": "reversi.core.scopes",
    "Selection": "reversi.core.scopes",
    "StepHandle": "reversi.engine.step_handle",
    "open": "reversi.engine.ledger",
    "open_async": "reversi.engine.async_ledger",
}

__all__ = [
    "Action",
    "ActionKind",
    "AsyncLedger",
    "Checkpoint",
    "CompensationWork",
    "Ledger",
    "Outcome",
    "Plan",
    "Retry",
    "RollbackReport",
    "Run",
    "RunFilter",
    "ScopePlan",
    "ScopeReport",
    "Selection",
    "StepHandle",
    "errors",
    "open",
    "open_async",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'reversi' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

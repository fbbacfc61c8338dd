"""What each console page shows, gathered from the engine (sync: call from a worker thread)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from markupsafe import Markup, escape

from reversi.core.json_values import JSONView
from reversi.core.models import RunSummary, StepStatus
from reversi.core.plan import ActionKind, Plan
from reversi.core.times import parse_duration, parse_time
from reversi.core.windows import Closing
from reversi.engine.ledger import Ledger
from reversi.engine.principal_ledger import Attention, PrincipalLedger
from reversi.errors import BadInput

PAGE_SIZE = 25
APPROVALS_SHOWN = 200  # on the approvals page, pending first
REFRESH_MS = {"runs": 5000, "job": 1000}  # how often a page's script refreshes the runs list, a job's progress
CLOSING_WITHIN = "24h"  # the runs list's "Closing soon": undo windows that close within this


def age(at: str, now: datetime | None = None) -> str:
    """`at` (RFC 3339) as "just now", "5 min ago", "3 h ago" or "2 d ago"."""
    then = parse_time(at)
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def clock(at: str | None) -> str:
    """`at` as a date and time to the second, UTC."""
    return parse_time(at).strftime("%Y-%m-%d %H:%M:%S UTC") if at else ""


def took(start: str | None, end: str | None) -> str:
    """How long from `start` to `end`, for people: "12 ms", "3.4 s", "5 min"."""
    if not start or not end:
        return ""
    seconds = (parse_time(end) - parse_time(start)).total_seconds()
    if seconds < 1:
        return f"took {seconds * 1000:.0f} ms"
    return f"took {seconds:.1f} s" if seconds < 120 else f"took {seconds / 60:.0f} min"


def step_list(steps: list[int]) -> str:
    """`[3]` as "step 3", `[1, 2]` as "steps 1, 2"."""
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(str(s) for s in steps)


# The ids a refusal's text names, each linked to where a person acts on it (halts are lifted on their
# page; approvals granted on theirs).
_IDS = re.compile(r"\b(halt_[0-9a-f-]{36}|apr_[0-9a-f]{32})\b")


def linked_ids(text: str) -> Markup:
    """`text`, escaped, with each halt and approval id in it a link to its page."""
    def link(found: re.Match[str]) -> str:
        name = found.group(1)
        page = "/halts" if name.startswith("halt_") else "/approvals"
        return f'<a href="{page}#{name}"><code>{name}</code></a>'

    return Markup(_IDS.sub(link, str(escape(text))))


def pretty(value: JSONView) -> str:
    """JSON for people: indented, keys sorted, every character as itself (the page escapes what HTML must)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def compact(value: JSONView) -> str:
    """JSON on one line, every character as itself."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def kill_switch(ledger: Ledger) -> str | None:
    """The kill switch's reason when it is on ("" for an empty file), else None: as the recorder sees
    it, so a kill file that cannot be read shows as on (calls are refused then)."""
    return ledger.kill_reason()


@dataclass
class RunRow:
    run_id: str
    status: str
    actor: str
    tenant: str
    age: str
    steps: int
    standing: int
    unresolved: int
    fully_reversible: bool
    active: bool
    labels: dict[str, str] = field(default_factory=dict)
    pending: int = 0  # approvals asked and not decided


@dataclass(frozen=True)
class RunFilters:
    """The runs list's filters, as typed (trimmed; empty is None)."""

    q: str | None = None  # text in the run id, actor, tenant or environment
    status: str | None = None
    actor: str | None = None
    tenant: str | None = None
    attention: str | None = None

    @classmethod
    def of(cls, query: Mapping[str, str]) -> RunFilters:
        return cls(*((query.get(k) or "").strip() or None for k in ("q", "status", "actor", "tenant", "attention")))

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}

    def attention_kind(self) -> Attention | None:
        """The attention filter, if it names one (raises BadInput if it names none)."""
        if self.attention is None:
            return None
        try:
            return Attention(self.attention)
        except ValueError:
            raise BadInput(f"attention {self.attention!r} is not one of {', '.join(a.value for a in Attention)}")\
                from None


def run_status(summary: RunSummary, plan: Plan, pending: int) -> str:
    """A run's state in a word or two, for the runs list."""
    statuses = summary.statuses
    if summary.unresolved or StepStatus.COMPENSATION_FAILED in statuses:
        return "needs attention"
    if StepStatus.COMPENSATING in statuses:
        return "rolling back"
    if pending:
        return "awaiting approval"
    undone = StepStatus.COMPENSATED in statuses
    if all(a.kind is ActionKind.SKIP for a in plan.actions):
        return "rolled back" if undone else "settled"
    return "partly rolled back" if undone else "standing"


def runs_page(ledger: PrincipalLedger, filters: RunFilters,
              after: tuple[str, str] | None) -> tuple[list[RunRow], tuple[str, str] | None]:
    """One page of the runs this principal may see, newest first, with their plans.

    Raises:
        BadInput: a bad status or attention filter.
    """
    contains = {"any": filters.q or "", "actor": filters.actor or "", "tenant": filters.tenant or ""}
    found = ledger.list_runs(status=filters.status, after=after, limit=PAGE_SIZE, contains=contains,
                             attention=filters.attention_kind())
    pending = ledger.awaiting_approval() if ledger.principal.reads_tenant else {}
    rows = []
    for s, plan in zip(found.items, ledger.plans([s.run for s in found.items]), strict=True):
        waiting = pending.get(s.run.run_id, 0)
        status = run_status(s, plan, waiting)
        rows.append(RunRow(s.run.run_id, status, s.run.scope.actor, s.run.scope.tenant, age(s.run.created_at),
                           s.steps, s.standing, s.unresolved, plan.fully_reversible,
                           active=bool(s.unresolved) or StepStatus.COMPENSATING in s.statuses or bool(waiting),
                           labels=dict(s.run.labels), pending=waiting))
    return rows, found.next


def nav_badges(ledger: PrincipalLedger) -> dict[str, int]:
    """The counts beside the navigation: halts that can refuse this principal's calls, pending approvals."""
    badges = {"halts": len(ledger.halts_in_force())}
    if ledger.principal.reads_tenant:
        badges["approvals"] = sum(ledger.awaiting_approval().values())
    return badges


@dataclass(frozen=True)
class ClosingRun:
    """A run with standing steps whose undo windows close soon: those steps, the soonest first."""

    run_id: str
    actor: str
    tenant: str
    steps: list[Closing]

    @property
    def soonest(self) -> Closing:
        return self.steps[0]


@dataclass(frozen=True)
class ClosingView:
    """The runs list's "Closing soon": `within` as typed, and the runs (None when it is no duration)."""

    within: str
    runs: list[ClosingRun] | None = None
    partial: bool = False  # only the newest runs with standing steps were looked at
    error: str | None = None


def closing_page(ledger: PrincipalLedger, within: str) -> ClosingView:
    """The runs this principal sees with a standing step whose undo window closes within `within`
    (24h, 7d), the soonest first; a bad duration is the view's error."""
    shown = within.strip()[:40]  # what the form's box shows again
    try:
        span = parse_duration(within, what="closing within")
    except BadInput as exc:
        return ClosingView(shown, error=exc.message)
    found, partial = ledger.closing_runs(span)
    runs = [ClosingRun(s.run.run_id, s.run.scope.actor, s.run.scope.tenant, steps) for s, steps in found]
    return ClosingView(shown, runs, partial)

"""The run as a picture: its steps newest first (the order a rollback takes), coloured by what the
plan does about each, with an arc from each step to each step it depends on; a deferred step says
which standing steps it waits for. Server-rendered SVG: no script, styled by the console's CSS."""

from __future__ import annotations

from collections.abc import Callable, Container

from markupsafe import Markup, escape

from reversi.core.plan import Action, ActionKind, Plan
from reversi.server.console.run_view import Dependency

MAX_STEPS = 150  # past this, the picture says it is too large to draw and the plan table is the view
_ROW, _BOX_H, _BOX_W, _TEXT = 46, 36, 440, 48
_LANE, _MAX_SPAN = 9, 12  # an arc bends left by _LANE per row it spans, up to _MAX_SPAN rows


def _short(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _why(action: Action, kinds: dict[int, str]) -> str:
    """What the plan does about a step, in a few words (`kinds`: every step's plan kind)."""
    if action.kind is ActionKind.DEFER:
        waits = ", ".join(f"{s} ({kinds.get(s, '?')})" for s in action.blocked_by)
        return f"waits while these stay: step {waits}"
    if action.kind is ActionKind.COMPENSATE and action.compensation is not None:
        comp = action.compensation
        extra = " · denied" if action.denied_approval else " · needs approval" if comp.needs_approval else ""
        return f"undo → {comp.tools}{extra}"
    return f"{action.kind.value}: {action.reason}" if action.reason else action.kind.value


def run_graph(plan: Plan, deps: dict[int, list[Dependency]], href: Callable[[int], str],
              shown: Container[int] | None = None) -> Markup:
    """The SVG of the plan's steps, or of those `shown` (a run's page shows a window of them: arcs to
    steps outside it are left out), each a link to `href(step)`; empty for no steps, a note past
    `MAX_STEPS`."""
    actions = tuple(a for a in plan.actions if shown is None or a.step in shown)
    if not actions:
        return Markup("")
    if len(actions) > MAX_STEPS:
        return Markup(f'<p class="muted">{len(actions)} steps: too many to draw; the plan below lists them.</p>')
    row = {a.step: i for i, a in enumerate(actions)}  # newest first, as the plan
    blocked = {(s, a.step) for a in actions for s in a.blocked_by}
    spans = [abs(row[d.step] - row[s]) for s, found in deps.items() for d in found if s in row and d.step in row]
    left = 24 + _LANE * min(max(spans), _MAX_SPAN) if spans else 4
    height = len(actions) * _ROW + 8
    parts = [f'<svg class="run-graph" role="img" aria-labelledby="graph-title" viewBox="0 0 {left + _BOX_W + 8} '
             f'{height}" width="{left + _BOX_W + 8}" preserveAspectRatio="xMinYMin meet">',
             '<title id="graph-title">The steps, newest first, and what each depends on</title>',
             '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker></defs>']
    for step, found in sorted(deps.items()):
        for dep in found:
            if step not in row or dep.step not in row:
                continue
            y1, y2 = _mid(row[step]), _mid(row[dep.step])
            bend = left - 14 - min(abs(row[dep.step] - row[step]), _MAX_SPAN) * _LANE
            cls = "edge blocking" if (step, dep.step) in blocked else "edge"
            parts.append(f'<path class="{cls}" d="M{left},{y1} C{bend},{y1} {bend},{y2} {left},{y2}" '
                         f'marker-end="url(#arrow)"><title>step {step} depends on step {dep.step} '
                         f'({escape(dep.why)})</title></path>')
    kinds = {a.step: a.kind.value for a in plan.actions}
    parts += [_node(a, _why(a, kinds), row[a.step] * _ROW + 4, left, href(a.step)) for a in actions]
    parts.append("</svg>")
    return Markup("".join(parts))


def _node(a: Action, why: str, y: int, left: int, href: str) -> str:
    return (f'<g class="node kind-{a.kind.value}{" denied" if a.denied_approval else ""}" id="graph-step-{a.step}">'
        f'<title>step {a.step} {escape(a.tool)}: {escape(why)}</title>'
        f'<a href="{escape(href)}"><rect x="{left}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6"/>'
        f'<text x="{left + 10}" y="{y + 15}" class="label">#{a.step} {escape(_short(a.tool, _TEXT))}</text>'
        f'<text x="{left + 10}" y="{y + 30}" class="why">{escape(_short(why, _TEXT + 14))}</text></a></g>')


def _mid(index: int) -> int:
    return index * _ROW + 4 + _BOX_H // 2

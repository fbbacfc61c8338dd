"""Resolving a step by hand: which fields of its result the undo needs, and a template of them.

A step settled as `succeeded` without the `$result` fields its compensation names can never be
undone (the plan calls it unrecoverable), so the Resolve form names them, starts from a result
with each of them to fill in, and asks once more before it accepts a result without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from reversi.core.json_values import JSON, JSONView
from reversi.core.manifest import ManifestSet, ToolEntry
from reversi.core.models import RunSnapshot, StepState
from reversi.core.references import resolve, result_references
from reversi.core.walk import entry_of, reference_context
from reversi.errors import MissingReference

Path = tuple[str | int | None, ...]


@dataclass(frozen=True)
class ResolveGuide:
    needs: list[str]  # the references, as the manifest writes them: `$result.id`
    template: str  # a result holding each of them, null: what to fill in


def _references(entry: ToolEntry | None) -> list[tuple[str, Path]]:
    if entry is None or not entry.compensations:
        return []
    found: dict[str, Path] = {}
    for comp in entry.compensations:
        for call in comp.calls:
            found.update(result_references(dict(call.args)))
    if entry.verification is not None:
        found.update(result_references(dict(entry.verification.args)))
    return list(found.items())


def guide(manifests: ManifestSet, step: StepState) -> ResolveGuide | None:
    """What the undo of `step` needs from its result; None when it needs nothing of it."""
    refs = _references(entry_of(manifests, step))
    if not refs:
        return None
    skeleton: JSON = None
    for _, path in refs:
        skeleton = _place(skeleton, path)
    text = json.dumps(skeleton, indent=2, ensure_ascii=False) if skeleton is not None else ""
    return ResolveGuide([written for written, _ in refs], text)


def missing_fields(manifests: ManifestSet, snapshot: RunSnapshot, step: int, result: JSONView) -> list[str]:
    """The `$result` references the step's undo needs that `result` does not give (or gives as null or "")."""
    state = snapshot.step(step)
    ctx = replace(reference_context(snapshot, state), result=result)
    missing = []
    for written, _ in _references(entry_of(manifests, state)):
        try:
            value = resolve(written, ctx)
        except MissingReference:
            missing.append(written)
            continue
        if value is None or value == "" or (isinstance(value, list) and None in value):
            missing.append(written)
    return missing


def _place(node: JSON, path: Path) -> JSON:
    """`node` with a null at `path` (keys make objects, indexes and `[*]` make lists)."""
    if not path:
        return node
    head, rest = path[0], path[1:]
    if isinstance(head, str):
        found = node if isinstance(node, dict) else {}
        found[head] = _place(found.get(head), rest)
        return found
    items = node if isinstance(node, list) else []
    index = head if isinstance(head, int) else 0
    items.extend([None] * (index + 1 - len(items)))
    items[index] = _place(items[index], rest)
    return items

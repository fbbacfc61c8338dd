"""Settling a call whose outcome is unknown from what the world says: a manifest's `probe`. Pure.

A step journaled `intended` or `uncertain` may or may not have taken effect. Its entry's probe is a
read (`tool`, `args` of `$args`, `$run`, `$step`); an answer matching `took_effect` settles the step
`succeeded`, with `result` (`$result` naming the answer) as its result; one matching `not_taken`
settles it `failed`. Anything else, an error or no answer leaves it unresolved, as it was: a probe
that cannot tell says so, and nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reversi.core.expect import first_mismatch
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON
from reversi.core.manifest import Probe
from reversi.core.references import ReferenceContext, resolve

__all__ = ["Probed", "judged"]


@dataclass(frozen=True)
class Probed:
    """What a probe said of one step: `succeeded` or `failed` (settled now), or `unresolved`, and why."""

    step: int
    tool: str
    outcome: str
    why: str

    def to_dict(self) -> JSONObject:
        return {"step": self.step, "tool": self.tool, "outcome": self.outcome, "why": self.why}

    def describe(self) -> str:
        return f"step {self.step}  {self.tool}  {self.outcome}  {self.why}"


def judged(probe: Probe, ctx: ReferenceContext, answer: LooseJSON, error: str | None) -> tuple[str, LooseJSON] | str:
    """`("succeeded", result)` or `("failed", None)` for the probe's answer (`error`: the read tool's own
    error answer, which `{$error: ...}` expects); else why it settles neither.

    Raises:
        MissingReference: an `expect` or `result` reference names nothing.
    """
    took = probe.took_effect is not None and _matches(probe.took_effect, ctx, answer, error)
    not_taken = probe.not_taken is not None and _matches(probe.not_taken, ctx, answer, error)
    if took and not_taken:
        return "its answer matches both took_effect and not_taken: it cannot tell"
    if took:
        return "succeeded", resolve(probe.result, replace(ctx, result=answer))
    if not_taken:
        return "failed", None
    return "its answer matches neither took_effect nor not_taken"


def _matches(expect: JSONObjectView, ctx: ReferenceContext, answer: LooseJSON, error: str | None) -> bool:
    return first_mismatch(resolve(dict(expect), ctx), answer, error) is None

"""What a call returned, journaled as JSON `$result` can read (issue 29, item 6): a slots dataclass by
its fields (it has no `__dict__`; its repr was journaled), as models and plain objects are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from reversi.core.json_values import to_json
from reversi.core.references import ReferenceContext, RunContext, resolve


@dataclass(slots=True, frozen=True)
class Moved:
    sku: str
    to: str
    tags: list[str] = field(default_factory=list)
    _secret_handle: int = 0


@dataclass
class Update:
    """Shaped like a framework's command object: what to update, and where to go next."""

    update: dict[str, Any]
    goto: str | None = None
    moved: Moved | None = None


class Receipt(BaseModel):
    id: str


class Plain:
    def __init__(self) -> None:
        self.id = "p-1"
        self._cache = object()


def test_dataclasses_models_and_objects_are_journaled_by_their_fields() -> None:
    assert to_json(Moved("lamp", "shelf-2", ["x"], 7)) == {"sku": "lamp", "to": "shelf-2", "tags": ["x"]}
    nested = to_json(Update({"stock": 2, "receipt": Receipt(id="r-1")}, moved=Moved("lamp", "b")))
    assert nested == {"update": {"stock": 2, "receipt": {"id": "r-1"}}, "goto": None,
                      "moved": {"sku": "lamp", "to": "b", "tags": []}}
    assert to_json(Plain()) == {"id": "p-1"}


def test_result_references_reach_into_a_dataclass_result() -> None:
    ctx = ReferenceContext(args={}, result=to_json(Update({"stock": 2}, moved=Moved("lamp", "b"))),
                           run=RunContext("run_x", "a", "t", "e"), step=0)
    assert resolve({"sku": "$result.moved.sku", "stock": "$result.update.stock"}, ctx) == {"sku": "lamp", "stock": 2}

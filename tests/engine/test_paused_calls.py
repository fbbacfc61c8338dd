"""A call that pauses (a framework waiting for an approval, or deferring the call to be answered
later) leaves its step open; the resumed call continues it; `settle` journals an answer that came
from elsewhere (issue 29, items 1 and 2). On both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import reversi
from reversi.errors import BadInput, NotFound


class Paused(Exception):
    """What a framework raises for a call that is to be approved, or answered, later."""


def test_a_paused_call_stays_open_and_its_resumption_continues_the_same_step(db_url: str) -> None:
    made: list[str] = []

    def remove(item: str, approved: bool = False) -> dict[str, Any]:
        if not approved:
            raise Paused
        made.append(item)
        return {"removed": item}

    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        with pytest.raises(Paused):
            asyncio.run(run.acall("remove", {"item": "lamp"}, remove, call_id="c-1", pauses=(Paused,)))
        (step,) = run.steps()
        assert (step.status.value, step.call_id) == ("intended", "c-1")
        done = asyncio.run(run.acall("remove", {"item": "lamp"}, lambda item: remove(item, approved=True),
                                     call_id="c-1", pauses=(Paused,)))
        assert done == {"removed": "lamp"} and made == ["lamp"]
        (step,) = run.steps()
        assert step.status.value == "succeeded" and step.result == {"removed": "lamp"}
        # another call of the same id but other arguments is a call of its own
        asyncio.run(run.acall("remove", {"item": "desk"}, lambda item: {"removed": item}, call_id="c-1"))
        assert [s.args for s in run.steps()] == [{"item": "lamp"}, {"item": "desk"}]


def test_an_answer_from_elsewhere_is_settled_on_the_open_step(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        for call_id in ("c-1", "c-2"):
            with pytest.raises(Paused):
                asyncio.run(run.acall("reserve", {"item": call_id}, lambda item: (_ for _ in ()).throw(Paused()),
                                      call_id=call_id, pauses=(Paused,)))
        assert run.settle("c-1", result={"reservation": "r-1"}).status.value == "succeeded"
        assert run.settle("c-2", error="the warehouse said no").status.value == "failed"
        with pytest.raises(NotFound, match=r"no open step of run_\w+ has call id 'c-1'"):
            run.settle("c-1", result={})  # settled already
        assert [(s.status.value, s.error) for s in run.steps()] == [("succeeded", None),
                                                                    ("failed", "the warehouse said no")]


@pytest.mark.parametrize("call_id", ["", "x" * 201, "a\nb", "\x1b[31mred"])
def test_a_call_id_that_is_not_a_short_printable_text_is_refused(db_url: str, call_id: str) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        with pytest.raises(BadInput, match="call_id must be 1-200 printable characters"):
            asyncio.run(run.acall("t", {}, lambda: None, call_id=call_id))
        assert run.steps() == ()

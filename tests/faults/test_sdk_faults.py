"""The SDK over a store that fails mid-run: a PostgreSQL stopped with `-m immediate`, a full disk, a
read-only disk. A call is made only once its `intended` is durable; a failure says so in one line;
nothing is reported that did not land; the same `Ledger` works again once the store is back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.faults.conftest import Fault, Faults

import reversi
from reversi.errors import StoreUnavailable

CHARGE = "stripe.create_charge"


def one_line_store_error(caught: pytest.ExceptionInfo[StoreUnavailable]) -> str:
    message = caught.value.message
    assert type(caught.value) is StoreUnavailable and caught.value.code == "store_unavailable"
    assert "\n" not in message and message.strip() == message and message, message
    return message


def test_calls_while_the_store_is_broken_run_nothing_and_work_again_once_it_is_back(
    fault: Fault, manifest: Path
) -> None:
    witness: list[int] = []

    def charge(amount: int) -> dict[str, Any]:
        witness.append(amount)
        return {"id": f"ch_{amount}"}

    with reversi.open(fault.url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        run.call(CHARGE, {"amount": 1}, charge)
        fault.inject()
        for amount in (2, 3):
            with pytest.raises(StoreUnavailable) as caught:
                run.call(CHARGE, {"amount": amount}, charge)
            one_line_store_error(caught)
        assert witness == [1]  # nothing ran that was not journaled first
        fault.heal()
        run.call(CHARGE, {"amount": 4}, charge)
        assert witness == [1, 4]
        steps = run.steps()
    assert [(s.args["amount"], s.status.value) for s in steps] == [(1, "succeeded"), (4, "succeeded")]


def test_a_call_whose_outcome_cannot_be_journaled_says_it_was_made_and_stays_intended(
    fault: Fault, manifest: Path
) -> None:
    def charge(amount: int) -> dict[str, Any]:
        fault.inject()  # the store breaks while the call is in flight
        return {"id": f"ch_{amount}"}

    with reversi.open(fault.url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        with pytest.raises(StoreUnavailable) as caught:
            run.call(CHARGE, {"amount": 7}, charge)
        message = one_line_store_error(caught)
        assert message.endswith(f"the call was made, but its outcome was not journaled: step 0 of {run.id} "
                                "stays intended (unresolved) until it is resolved"), message
        fault.heal()
        state = run.step_state(0)
    assert state.status.value == "intended"  # not `failed`: it may well have worked


def test_a_write_too_large_for_the_page_cache_on_a_full_disk_is_store_unavailable(faults: Faults) -> None:
    """SQLite spills a large transaction before its commit: the full disk is met inside the write."""
    fault = faults.make("disk-full")
    witness: list[str] = []
    with reversi.open(fault.url) as ledger:
        run = ledger.start_run()
        fault.inject()
        with pytest.raises(StoreUnavailable) as caught:
            run.call("files.write", {"text": "x" * 3_000_000}, lambda text: witness.append(text))
        assert "database or disk is full" in one_line_store_error(caught)
        fault.heal()
        assert witness == [] and run.steps() == ()

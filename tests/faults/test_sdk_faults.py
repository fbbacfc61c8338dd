"""The SDK over a store that fails mid-run: a PostgreSQL stopped with `-m immediate`, a full disk, a
read-only disk. A call is made only once its `intended` is durable; a failure says so in one line;
nothing is reported that did not land; the same `Ledger` works again once the store is back."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable
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
    assert "is locked" not in message, message  # none of these faults is another writer holding the file
    return message


def charges() -> tuple[list[int], Callable[[int], dict[str, Any]]]:
    """A charge to make through `run.call`, and the amounts it was made with (a witness)."""
    witness: list[int] = []

    def charge(amount: int) -> dict[str, Any]:
        witness.append(amount)
        return {"id": f"ch_{amount}"}

    return witness, charge


def test_calls_while_the_store_is_broken_run_nothing_and_work_again_once_it_is_back(
    fault: Fault, manifest: Path
) -> None:
    witness, charge = charges()
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


def test_reads_during_the_outage_do_not_leave_the_store_on_the_broken_disk(fault: Fault, manifest: Path) -> None:
    """A read while the disk is broken may open the file again (on the read-only mount, where it works);
    the first write once the disk is repaired and mounted anew must still reach the new mount."""
    witness, charge = charges()
    with reversi.open(fault.url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        run.call(CHARGE, {"amount": 1}, charge)
        fault.inject()
        with pytest.raises(StoreUnavailable):
            run.call(CHARGE, {"amount": 2}, charge)
        for _ in range(2):
            with contextlib.suppress(StoreUnavailable):  # a read may work on a read-only disk, or not
                run.steps()
        fault.heal()
        run.call(CHARGE, {"amount": 3}, charge)
        assert witness == [1, 3]
        steps = run.steps()
    assert [(s.args["amount"], s.status.value) for s in steps] == [(1, "succeeded"), (3, "succeeded")]


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


def test_a_rollback_that_cannot_journal_an_undo_reports_nothing_and_the_next_finishes_it_with_the_same_key(
    fault: Fault, manifest: Path
) -> None:
    applied: list[tuple[int, str]] = []  # the downstream's log: (step, idempotency key) of every undo it got

    def compensate(call: dict[str, Any]) -> dict[str, Any]:
        applied.append((call["step"], call["idempotency_key"]))
        if len(applied) == 1:
            fault.inject()  # the store breaks while the first undo runs
        return {"refunded": True}

    with reversi.open(fault.url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        for amount in (1, 2):
            run.call(CHARGE, {"amount": amount}, lambda amount: {"id": f"ch_{amount}"})
        with pytest.raises(StoreUnavailable) as caught:
            run.rollback(compensate)
        one_line_store_error(caught)
        assert [step for step, _ in applied] == [1]  # the second undo was not started unjournaled
        fault.heal()
        assert [e.type for e in run.events() if e.step == 1][-1] == "compensating"  # never claimed compensated
        report = run.rollback(compensate)
    assert report.compensated == [1, 0] and report.complete
    assert [step for step, _ in applied] == [1, 1, 0]
    assert applied[0] == applied[1]  # the undo that may have landed is asked again with its own key


def test_the_cli_says_in_one_line_that_the_store_is_broken_and_changes_nothing(fault: Fault) -> None:
    reversi_cli = str(Path(sys.executable).parent / "reversi")
    with reversi.open(fault.url):
        pass  # migrated while it is healthy
    fault.inject()
    done = subprocess.run([reversi_cli, "--db", fault.url, "halt", "add", "stop"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("reversi: error: ") and "store" in lines[0], done.stderr
    fault.heal()
    with reversi.open(fault.url) as ledger:
        assert ledger.halts() == []

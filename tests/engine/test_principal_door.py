"""The principal-bound ledger decides what every surface would otherwise decide on its own: a rollback
job needs a compensator to run it (409 over HTTP), checked before anything is queued or contained; a
rollback that names no attempts takes its surface's; the calls the gateway forwards are journaled in
its principal's runs only."""

from __future__ import annotations

import asyncio

import pytest

import reversi
from reversi.core.models import StepStatus
from reversi.core.scopes import Selection
from reversi.core.surfaces import Surface
from reversi.engine.keys import LOCAL_ADMIN, Principal, Role
from reversi.errors import BadInput, Forbidden, NoCompensator, NotFound


def _run_with_a_step(ledger: reversi.Ledger) -> str:
    run = ledger.start_run(actor="bot")
    run.begin("jobs.create", {"name": "a"}).succeeded({"id": "j1"})
    return run.id


def test_no_rollback_job_is_queued_without_a_compensator(ledger: reversi.Ledger) -> None:
    run_id = _run_with_a_step(ledger)
    door = ledger.for_principal(LOCAL_ADMIN)
    with pytest.raises(NoCompensator, match="no compensator configured"):
        door.submit_rollback(run_id, has_compensator=False)
    with pytest.raises(NotFound):
        door.latest_job(run_id)
    # a bad scope says so first, whatever else is missing
    with pytest.raises(BadInput):
        door.submit_rollback(run_id, has_compensator=False, after_step=-2)
    assert door.submit_rollback(run_id, has_compensator=True).row.run_id == run_id


def test_a_scope_rollback_without_a_compensator_contains_nothing(ledger: reversi.Ledger) -> None:
    _run_with_a_step(ledger)
    door = ledger.for_principal(Principal("root", Role.ADMIN))
    with pytest.raises(NoCompensator):
        door.submit_scope_rollback(Selection(actor="bot"), has_compensator=False, contain=True, reason="leak")
    assert door.halts() == []
    with pytest.raises(BadInput):  # bad attempts are said before the missing compensator
        door.submit_scope_rollback(Selection(actor="bot"), has_compensator=False, attempts=0)


@pytest.mark.parametrize(("surface", "attempts"), [(Surface.API, 1), (Surface.CLI, 1), (Surface.CONSOLE, 3),
                                                   (Surface.GATEWAY, 3), (Surface.SDK, 1)])
def test_a_rollback_that_does_not_say_takes_its_surfaces_attempts(ledger: reversi.Ledger, surface: Surface,
                                                                  attempts: int) -> None:
    run_id = _run_with_a_step(ledger)
    door = ledger.for_principal(LOCAL_ADMIN, surface)
    assert door.submit_rollback(run_id, has_compensator=True).row.attempts == attempts
    scoped = door.submit_scope_rollback(Selection(actor="bot"), has_compensator=True)
    assert door.scope_job(scoped.job_id).row.attempts == attempts


def test_a_rollback_that_says_takes_its_own_attempts(ledger: reversi.Ledger) -> None:
    run_id = _run_with_a_step(ledger)
    assert ledger.for_principal(LOCAL_ADMIN, Surface.CONSOLE).submit_rollback(
        run_id, has_compensator=True, attempts=5).row.attempts == 5


def test_only_the_gateway_journals_a_call_it_forwards_and_only_in_its_principals_run(ledger: reversi.Ledger) -> None:
    bot = Principal("bot", Role.AGENT)
    via = {"name": "files", "tool": "write_file"}

    async def scenario() -> None:
        gateway, api = ledger.for_principal(bot, Surface.GATEWAY), ledger.for_principal(bot, Surface.API)
        record = gateway.open_run(actor="bot")[0].record
        with pytest.raises(Forbidden, match="only the gateway"):
            await api.abegin_forwarded(record, "files.write_file", {"path": "a"}, via=via)
        other = ledger.for_principal(Principal("eve", Role.AGENT), Surface.GATEWAY)
        with pytest.raises(Forbidden, match="belongs to another principal"):
            await other.abegin_forwarded(record, "files.write_file", {"path": "a"}, via=via)
        with pytest.raises(Forbidden, match="belongs to another principal"):
            await other.acheckpoint(record, "before")
        step = await gateway.abegin_forwarded(record, "files.write_file", {"path": "a"}, via=via)
        with pytest.raises(Forbidden, match="belongs to another principal"):
            await other.aforwarded_outcome(record, step, StepStatus.FAILED, error="not mine")
        await gateway.aforwarded_outcome(record, step, StepStatus.SUCCEEDED, result={"written": True})
        assert [s.status for s in gateway.snapshot(record.run_id).steps] == [StepStatus.SUCCEEDED]

    asyncio.run(scenario())

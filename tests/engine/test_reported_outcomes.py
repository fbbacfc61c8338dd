"""An agent's word about an outcome is taken only for calls it made itself: a step the gateway called
and journals cannot be settled first by the same key over HTTP (that would hide what the upstream did)."""

from __future__ import annotations

import asyncio

import pytest

import reversi
from reversi.core.models import StepStatus
from reversi.engine.keys import Principal, Role
from reversi.errors import Forbidden


def test_an_agent_cannot_report_the_outcome_of_a_step_the_gateway_called(ledger: reversi.Ledger) -> None:
    agent = Principal("bot", Role.AGENT)
    door = ledger.for_principal(agent)

    async def scenario() -> None:
        record = door.open_run(actor="bot")[0].record
        via = {"name": "files", "tool": "write_file"}
        step = await ledger.abegin(record, "files.write_file", {"path": "a"}, via=via)
        with pytest.raises(Forbidden, match=f"step {step} of {record.run_id} was called through the gateway"):
            await door.aoutcome(record.run_id, step, StepStatus.FAILED, error="nothing happened, honest")
        await ledger.aoutcome(record, step, StepStatus.SUCCEEDED, result={"written": True})
        own = await door.abegin(record.run_id, "files.write_file", {"path": "b"})
        state = await door.aoutcome(record.run_id, own, StepStatus.SUCCEEDED, result={"written": True})
        assert state.status is StepStatus.SUCCEEDED
        statuses = [s.status for s in ledger.get_run(record.run_id).snapshot().steps]
        assert statuses == [StepStatus.SUCCEEDED, StepStatus.SUCCEEDED]

    asyncio.run(scenario())

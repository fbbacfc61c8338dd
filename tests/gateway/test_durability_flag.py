"""`reversi-gateway --durability`: what a call waits for before its answer goes back to the agent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.gateway.conftest import GATEWAY, WAIT_S, Shop, gateway

import reversi
from reversi.core.models import StepStatus


@pytest.mark.anyio
async def test_with_durability_intent_the_gateway_journals_each_call_and_its_outcome(
    tmp_path: Path, shop: Shop
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with gateway("--upstream", shop.flag(), "--db", db, "--durability", "intent", "--run-id", "run_i") as agent:
        for text in ("one", "two"):
            assert (await agent.call_tool("echo", {"text": text})).content[0].text == text  # type: ignore[union-attr]
    with reversi.open(db) as ledger:  # the gateway has ended: what it committed, closing included
        steps = ledger.get_run("run_i").steps()
    assert [(s.tool, s.status) for s in steps] == [("echo", StepStatus.SUCCEEDED)] * 2


@pytest.mark.parametrize(("args", "message"), [
    (["--durability", "sometimes"], "invalid choice: 'sometimes' (choose from 'full', 'intent')"),
    (["--durability", ""], "invalid choice: '' (choose from 'full', 'intent')"),
])
def test_a_bad_durability_stops_the_gateway_at_start_in_one_line(
    tmp_path: Path, shop: Shop, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [str(GATEWAY), "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db", *args],
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(message), done.stderr
    assert not (tmp_path / "r.db").exists()


def test_the_operator_refuses_durability(tmp_path: Path, shop: Shop) -> None:
    done = subprocess.run(
        [str(GATEWAY), "operator", "--upstream", shop.flag(), "--db", f"sqlite:///{tmp_path}/r.db",
         "--durability", "intent"],
        capture_output=True, text=True, timeout=WAIT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert "drop --durability" in done.stderr

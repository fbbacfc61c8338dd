"""The operator tools read and write the store off the event loop: a store another process holds
locked slows the tool down, never the loop (which also answers the agents' calls)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

import reversi
from reversi.core.surfaces import Surface
from reversi.engine.keys import Principal, Role
from reversi.gateway.operator import Operator
from reversi.gateway.options import UpstreamSpec
from reversi.gateway.upstream import UpstreamPool

pytestmark = pytest.mark.anyio
LOCK_HELD_S = 1.0
MAX_STALL_S = 0.2




@pytest.mark.parametrize(("tool", "arguments"), [("reversi.halt", {"reason": "drill"}), ("reversi.resume", {}),
                                                 ("reversi.resolve_step", {"run_id": "run_loop", "step": 0,
                                                                           "status": "failed", "note": "checked"})])
async def test_an_operator_tool_waiting_for_a_locked_store_never_stalls_the_event_loop(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    path = tmp_path / "r.db"
    with reversi.open(f"sqlite:///{path}") as ledger:
        ledger.start_run("run_loop").begin("shop.create_order", {"id": 1})  # step 0 stays intended
        ledger.add_halt("earlier", by="ops")
        door = ledger.for_principal(Principal("ops", Role.ADMIN), Surface.GATEWAY)
        operator = Operator(lambda ctx: door, UpstreamPool((UpstreamSpec("idle", ("true",)),)), 5.0)
        locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        locker.execute("BEGIN IMMEDIATE")  # another process's write transaction, held for a while
        release = threading.Timer(LOCK_HELD_S, lambda: locker.execute("COMMIT"))
        gaps: list[float] = []

        async def tick() -> None:
            last = time.monotonic()
            while True:
                await anyio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            release.start()
            result = await operator.call_tool(
                None,  # type: ignore[arg-type]  # the door is the admin's, whatever the request
                types.CallToolRequestParams(name=tool, arguments=arguments))
            tg.cancel_scope.cancel()
        took = time.monotonic() - started
        release.join()
        locker.close()
    assert not result.is_error, result
    assert took >= LOCK_HELD_S * 0.8  # the tool did wait for the lock
    assert max(gaps) < MAX_STALL_S, f"the event loop stalled {max(gaps):.3f} s"

"""The campaign's `gateway` target: `reversi-gateway --http` in front of the witness's MCP server; an agent
calls tools through `/mcp` (its run named by `Reversi-Run-Id`) and an operator rolls back through
`/operator/mcp` (`reversi.execute_rollback`); the witness SIGKILLs the gateway at the seed's moment.

The operator then restarts it, settles the unresolved steps with `reversi.resolve_step` (reading the run
from the store, and the truth from the witness) and rolls back again. Both sides are the official MCP
SDK's client over streamable HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.reliability.long_lived import WAIT_S, Died, LongLived
from tests.reliability.recovery import NOTE, OPERATOR, settlement
from tests.reliability.workload import Workload, shares

from reversi.errors import NotFound

if TYPE_CHECKING:
    from tests.reliability.campaign import Cell

T = TypeVar("T")
CALL_TIMEOUT_S = 0.6  # the witness answers a `timeout` call after 1 s


class GatewayDriver(LongLived):
    label = "reversi-gateway"
    pattern = r"serving (http://\S+)/mcp"

    def __init__(self, cell: Cell) -> None:
        from tests.reliability.campaign import BIN

        argv = [str(BIN / "reversi-gateway"), "--http", "127.0.0.1:0", "--upstream", f"w={cell.mcp_url}",
                "--db", cell.store_url, "-m", str(cell.manifest), "--call-timeout", str(CALL_TIMEOUT_S)]
        super().__init__(cell, argv, {})

    @asynccontextmanager
    async def _client(self, path: str, headers: dict[str, str]) -> AsyncIterator[Client]:
        assert self.process is not None
        async with (
            httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http,
            Client(streamable_http_client(f"{self.process.url}{path}", http_client=http), cache=None) as client,
        ):
            yield client

    def _through(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` on an event loop; a failure while the gateway is gone is Died."""
        assert self.process is not None
        if not self.process.alive():
            raise Died()
        try:
            return anyio.run(work)
        except Exception as exc:
            raise self.died(exc) from exc

    def workload(self, w: Workload) -> None:
        """The agents call at once (each its share, in order), then the operator rolls back."""

        async def agent(mine: list[int]) -> None:
            async with self._client("/mcp", {"Reversi-Run-Id": w.run_id}) as client:
                for i in mine:
                    call = w.calls[i]
                    answer = await client.call_tool(call.tool, call.args)
                    # the gateway journals the outcome before it answers (an error: failed, or uncertain)
                    said = ["failed", "uncertain"] if answer.is_error else "succeeded"
                    self.cell.ack_call(w.run_id, call.args["op"], said, "the gateway's answer")

        async def work() -> None:
            async with anyio.create_task_group() as agents:
                for mine in shares(w):
                    agents.start_soon(agent, mine)
            await self._rollback(w)

        self._through(work)

    async def _rollback(self, w: Workload) -> dict[str, Any]:
        async with self._client("/operator/mcp", {}) as operator:
            answer = await operator.call_tool("reversi.execute_rollback", {
                "run_id": w.run_id, "confirm": True, "approve_compensations": True})
        if answer.is_error or not isinstance(answer.structured_content, dict):
            raise AssertionError(f"reversi.execute_rollback of {w.run_id}: {answer.content}")
        report = answer.structured_content
        self.cell.report("reversi.execute_rollback", report)
        return report

    def recover(self, w: Workload) -> dict[str, Any]:
        try:
            steps = self.cell.ledger.get_run(w.run_id).steps()
        except NotFound:
            return {}  # killed before the run was opened: nothing happened
        unresolved = [s for s in steps if s.status.unresolved]

        async def work() -> dict[str, Any]:
            async with self._client("/operator/mcp", {}) as operator:
                for state in unresolved:
                    status, result = settlement(self.cell.directory, state.args.get("op"))
                    args = {"run_id": w.run_id, "step": state.index, "status": status, "note": NOTE,
                            "actor": OPERATOR, **({"result": result} if result else {})}
                    answer = await operator.call_tool("reversi.resolve_step", args)
                    if answer.is_error:
                        raise AssertionError(f"reversi.resolve_step {args}: {answer.content}")
            return await self._rollback(w)

        return self._through(work)

"""The campaign's `server` target: an agent records over HTTP and an operator rolls back with a job, on a
`reversi-server` that the witness SIGKILLs at the seed's moment; the operator restarts it and finishes
(a job the dead server left is resumed by the new one). The jobs run the witness's commands."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
from tests.reliability.long_lived import WAIT_S, Died, LongLived
from tests.reliability.recovery import NOTE, OPERATOR, settlement
from tests.reliability.witness_client import WitnessError
from tests.reliability.workload import Workload, shares

if TYPE_CHECKING:
    from tests.reliability.campaign import Cell

POLL_S = 0.025


class ServerDriver(LongLived):
    label = "reversi-server"
    pattern = r"listening on (http://\S+)"

    def __init__(self, cell: Cell) -> None:
        from tests.reliability.campaign import BIN

        argv = [str(BIN / "reversi-server"), "--port", "0", "--db", cell.store_url, "-m", str(cell.manifest),
                "--log-level", "warning"]
        super().__init__(cell, argv, {"REVERSI_COMPENSATOR_CMD": cell.command("compensate"),
                                      "REVERSI_READER_CMD": cell.command("read")})
        self.http: httpx.Client | None = None

    def started(self) -> None:
        if self.http is not None:
            self.http.close()
        assert self.process is not None
        self.http = httpx.Client(base_url=self.process.url, timeout=WAIT_S)

    def _call(self, method: str, path: str, http: httpx.Client | None = None, **kwargs: Any) -> httpx.Response:
        assert self.process is not None and self.http is not None
        if not self.process.alive():
            raise Died()
        try:
            return (http or self.http).request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self.died(exc) from exc

    def _ok(self, method: str, path: str, expect: int, http: httpx.Client | None = None, **kwargs: Any) -> Any:
        answer = self._call(method, path, http, **kwargs)
        if answer.status_code != expect:
            raise AssertionError(f"{method} {path}: {answer.status_code} {answer.text}")
        return answer.json()

    def workload(self, w: Workload) -> None:
        self._record(w)
        self._rollback(w)

    def recover(self, w: Workload) -> dict[str, Any]:
        if self._call("GET", f"/v1/runs/{w.run_id}").status_code == 404:
            return {}  # killed before the run was opened: nothing happened
        self._finish_job(w)
        for step in self._ok("GET", f"/v1/runs/{w.run_id}", 200)["steps"]:
            if step["status"] in ("intended", "uncertain"):
                status, result = settlement(self.cell.directory, step["args"].get("op"))
                body = {"status": status, "note": NOTE, "actor": OPERATOR, **({"result": result} if result else {})}
                self._ok("POST", f"/v1/runs/{w.run_id}/steps/{step['step']}/resolve", 200, json=body)
        return self._rollback(w)

    def _record(self, w: Workload) -> None:
        """Open the run, then the agents record their calls at once, each on its own connection."""
        self._ok("POST", "/v1/runs", 201, json={"scope": {"actor": "campaign"}}, headers={"Reversi-Run-Id": w.run_id})
        with ThreadPoolExecutor(w.agents) as pool:
            for done in [pool.submit(self._agent, w, mine) for mine in shares(w)]:
                done.result()

    def _agent(self, w: Workload, mine: list[int]) -> None:
        """One agent's calls, in order, on a connection of its own; a `depends_on` on another agent's
        call is left out (its step number is not known here)."""
        cell, run_id = self.cell, w.run_id
        assert self.process is not None
        steps: dict[int, int] = {}
        with httpx.Client(base_url=self.process.url, timeout=WAIT_S) as http:
            for i in mine:
                call = w.calls[i]
                body = {"tool": call.tool, "args": call.args,
                        "depends_on": [steps[d] for d in call.depends_on if d in steps]}
                step = steps[i] = self._ok("POST", f"/v1/runs/{run_id}/steps", 201, json=body, http=http)["step"]
                cell.ack(run_id, step, "intended", "POST /steps")
                outcome: dict[str, Any]
                try:
                    result = cell.witness.forward(call.tool, call.args)
                    outcome = ({"status": "uncertain", "error": "timed out"} if call.timeout
                               else {"status": "succeeded", "result": result})
                except WitnessError as exc:
                    outcome = {"status": "failed", "error": str(exc)}
                self._ok("POST", f"/v1/runs/{run_id}/steps/{step}/outcome", 200, json=outcome, http=http)
                cell.ack(run_id, step, outcome["status"], "POST /outcome")

    def _rollback(self, w: Workload) -> dict[str, Any]:
        body = {"confirm": True, "retries": w.retries, "approve_compensations": True, "actor": OPERATOR}
        self._ok("POST", f"/v1/runs/{w.run_id}/rollback", 202, json=body)
        report = self._finish_job(w)
        assert report is not None
        return report

    def _finish_job(self, w: Workload) -> dict[str, Any] | None:
        """Wait for the run's latest rollback job to be done; its report (None: the run never had a job)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            answer = self._call("GET", f"/v1/runs/{w.run_id}/rollback")
            if answer.status_code == 404:
                return None
            job = answer.json()
            if job["state"] == "done":
                if job["error"]:
                    raise AssertionError(f"the rollback job of {w.run_id} failed: {job['error']}")
                report: dict[str, Any] = job["report"]
                self.cell.report("rollback job", report)
                return report
            time.sleep(POLL_S)
        raise AssertionError(f"the rollback job of {w.run_id} did not finish in {WAIT_S:g} s")

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
        super().close()

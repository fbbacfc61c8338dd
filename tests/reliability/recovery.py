"""What an operator does after a crash, with the witness as the source of truth about the world, and
what the campaign asks of the end result beyond the checker's invariants."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.reliability.checker import Violation
from tests.reliability.world import CREATES, IRREVERSIBLE, WITNESS_LOG, read_lines

NOTE = "checked downstream (the campaign's witness)"
OPERATOR = "campaign-operator"
MAX_ROLLBACKS = 5
KILL_QUIET_MS = 30  # after a kill: what the dead process had on the wire reaches the witness first


def settlement(directory: Path, op: object) -> tuple[str, Any]:
    """How an operator settles the unresolved call `op` after looking downstream: `succeeded` with the
    result the downstream gave, when the call took effect; else `failed` (it never did)."""
    for record in read_lines(directory / WITNESS_LOG):
        if record.get("kind") == "forward" and record.get("op") == op and record.get("effect"):
            return "succeeded", record["result"]
    return "failed", None


def settled(report: Mapping[str, Any], tools: dict[int, str]) -> bool:
    """Whether a rollback report leaves nothing for the operator to do: what is left standing is
    irreversible by its manifest, and nothing else is."""
    left = [report.get(k) for k in ("failed", "unresolved", "unmanifested", "deferred", "awaiting_approval",
                                     "unverified")]
    return not any(left) and all(tools.get(u["step"]) in IRREVERSIBLE for u in report.get("unrecoverable", []))


def restored(directory: Path, run_id: str, op_prefix: str) -> list[Violation]:
    """After the recovery: every object the run created downstream is undone, unless its tool is
    irreversible (then it must still be there)."""
    found = []
    undone = {r.get("target") for r in read_lines(directory / WITNESS_LOG)
              if r.get("kind") == "compensate" and r.get("outcome") in ("applied", "again")}
    for record in read_lines(directory / WITNESS_LOG):
        if record.get("kind") != "forward" or not record.get("effect") or not str(record["op"]).startswith(op_prefix):
            continue
        op, tool = record["op"], record["tool"]
        if tool in CREATES and tool not in IRREVERSIBLE and op not in undone:
            found.append(Violation("not-restored", f"{tool} {op} took effect and was never undone", run_id))
        if tool in IRREVERSIBLE and op in undone:
            found.append(Violation("not-restored", f"{tool} {op} is irreversible, yet was undone", run_id))
    return found

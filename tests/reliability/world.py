"""The downstream world the witness keeps, as Reversi sees it: its tools, their manifest, and the files
of a witness directory (`witness.jsonl`, `acks.jsonl`, `reports.jsonl`), each an fsynced JSON-lines log.

Every forward tool but `w_lookup` (a read) creates one object, named by the call's `op`, unmanifested
ones (`w_misc`) too; each undo tool takes the object back by id. What a call does beyond that is in its
arguments, so the seed that wrote the workload decides it: `fail` (the downstream refuses, nothing
happens), `undo_fails` (the first N undos of the object fail), `read_lag` (the first N read-backs after
the undo still show it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST = """\
version: 1
tools:
  w_create:
    compensation:
      tool: w_delete
      args: {id: "$result.id"}
      kind: inverse
    verification:
      tool: w_get
      args: {id: "$result.id"}
      expect: {exists: false}
      retries: 3
      backoff_ms: 1
  w_charge:
    compensation:
      tool: w_refund
      args: {id: "$result.id"}
  w_attach:
    requires: [w_create]
    compensation:
      tool: w_detach
      args: {id: "$result.id"}
  w_guarded:
    compensation:
      tool: w_release
      args: {id: "$result.id"}
      requires_approval: true
  w_notify:
    irreversible: true
  w_lookup:
    effect: read
  w_get:
    effect: read
  w_ask:
    requires_approval: true
    compensation:
      tool: w_unask
      args: {id: "$result.id"}
  w_order:
    idempotency:
      key: ["$args.order"]
    compensation:
      tool: w_cancel
      args: {id: "$result.id"}
"""

CREATES = ("w_create", "w_charge", "w_attach", "w_guarded", "w_notify", "w_ask", "w_order")
READS = ("w_lookup",)
UNDOES = ("w_delete", "w_refund", "w_detach", "w_release", "w_unask", "w_cancel")
READ_BACK = "w_get"
IRREVERSIBLE = ("w_notify",)

WITNESS_LOG = "witness.jsonl"
ACKS = "acks.jsonl"
REPORTS = "reports.jsonl"


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync it: a SIGKILL a moment later cannot take it back."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole line of a log; a last line torn by a kill mid-write is left out."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found

"""Forward results an agent could report instead of the one the connector sealed, and the check that
an undo given one changes nothing: `reversi-connectors compensate` exits 1 with one line, and the
fake API behind the connector sees no request at all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tests.connectors.conftest import connectors_cli

from reversi.connectors._seal import FIELD, seal
from reversi.demo.fakes.base import FakeBase

OTHER_KEY = "another connector's sealing key, not this one's"
REFUSED = ("untrusted result: ", "bad argument result: expected an object")


@contextmanager
def other_key() -> Iterator[None]:
    """Seal under a key that is not the connector's (as if a forward call of another deployment made it)."""
    before = os.environ.get("REVERSI_CONNECTOR_KEY")
    os.environ["REVERSI_CONNECTOR_KEY"] = OTHER_KEY
    try:
        yield
    finally:
        if before is None:
            del os.environ["REVERSI_CONNECTOR_KEY"]
        else:
            os.environ["REVERSI_CONNECTOR_KEY"] = before


def forgeries(genuine: Mapping[str, Any], victim: Mapping[str, Any], other_tool: Mapping[str, Any]
              ) -> dict[str, Any]:
    """Each way to point an undo at `victim` (fields of a result the run never made) starting from a
    `genuine` sealed result; `other_tool` is a genuine sealed result of another forward tool."""
    mark = genuine[FIELD]
    bare = {k: v for k, v in genuine.items() if k != FIELD}
    with other_key():
        foreign = seal(mark["tool"], {**bare, **victim}, mark["args"])
    return {
        "unsealed": {**bare, **victim},
        "altered": {**genuine, **victim},
        "seal args altered": {**genuine, FIELD: {**mark, "args": {**mark["args"], **victim}}},
        "seal of another tool": {**bare, **victim, FIELD: {**mark, "tool": other_tool[FIELD]["tool"]}},
        "mac made up": {**bare, **victim, FIELD: {**mark, "mac": "0" * 64}},
        "mac not ascii": {**bare, **victim, FIELD: {**mark, "mac": "\u00e9" * 64}},
        "seal not an object": {**bare, **victim, FIELD: "trust me"},
        "another tool's genuine result": dict(other_tool),
        "sealed under another key": foreign,
        "not an object": victim.get("id", "x"),
    }


def assert_refused(compensation: str, result: Any, fake: FakeBase, step: int = 0) -> str:
    """`compensate` refuses `result` with one line, and the fake saw no request."""
    seen = len(fake.requests)
    call = {"run_id": "run_forged", "step": step, "tool": compensation, "original_tool": "?",
            "args": {"result": result, "step": step}, "idempotency_key": "k-forged", "attempt": 1}
    done = connectors_cli("compensate", stdin=json.dumps(call))
    assert (done.code, done.out) == (1, ""), done
    assert done.err.count("\n") == 1 and done.err.startswith(REFUSED), done.err
    assert len(fake.requests) == seen, fake.requests[seen:]
    return done.err.strip()

"""A drill undoes its call as the operator does: the compensation (its approval granted by the drill,
in its scratch store) reaches the server with the step's idempotency key in `_meta`, the declared
read-back runs, and a world that differs where the entry declares residue passes (against
tests/gateway/upstream_server.py, whose cancel keeps the order)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.cli.conftest import reversi_cli
from tests.gateway.conftest import SHOP_MANIFEST, UPSTREAM

RESIDUE = SHOP_MANIFEST.replace("      kind: inverse\n", "      residue: [\"the order stays, canceled\"]\n"
                                                       "      requires_approval: true\n")


def test_a_drill_sends_the_undo_with_its_idempotency_key_runs_the_read_back_and_accepts_declared_residue(
    tmp_path: Path,
) -> None:
    (tmp_path / "shop.yaml").write_text(RESIDUE)
    done = reversi_cli(
        "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", "create_order", "-m", "shop.yaml",
        "--upstream", shlex.join([sys.executable, str(UPSTREAM), "{scratch}"]), "--args", '{"order_id": "o-1"}',
        "--read", 'get_order={"order_id": "o-1"}', "--keep", "--json", cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    drill = json.loads(done.stdout)
    try:
        check_the_evidence(drill)
    finally:
        shutil.rmtree(drill["scratch"])


def check_the_evidence(drill: dict[str, Any]) -> None:
    assert drill["verdict"] == "residue" and drill["residue"] == ["the order stays, canceled"]
    assert drill["differences"] == ['get_order {"order_id":"o-1"}.status: "missing" -> "canceled"',
                                    'get_order {"order_id":"o-1"}.id: (absent) -> "ord_o-1"',
                                    'get_order {"order_id":"o-1"}.amount: (absent) -> 0']
    events = drill["undo"]["events"]
    assert [e["type"] for e in events] == ["approval_requested", "approval_granted", "compensating", "verified",
                                           "compensated"]
    compensating = events[2]
    [cancel] = [json.loads(line) for line in (Path(drill["scratch"]) / "data" / "calls.jsonl").read_text()
                .splitlines() if json.loads(line)["tool"] == "cancel_order"]
    assert cancel["meta"]["reversi/idempotency_key"] == compensating["idempotency_key"]
    assert (drill["read_back"]["type"], drill["read_back"]["answer"]["status"]) == ("verified", "canceled")
    assert {"data", "drill.db"} <= {p.name for p in Path(drill["scratch"]).iterdir()}

"""An undo made of several calls (`compensation.then`, issue 28 item 2): each call journaled with the
step's key and its index, and a re-run, after a failure or a killed process, that starts at the first
call not known done."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.engine.keys import Principal, Role
from reversi.errors import NotCompensable

MANIFEST = """\
version: 1
tools:
  notes.rename:
    capture: {tool: notes.read, args: {path: "$args.path"}}
    compensation:
      tool: notes.write
      args: {path: "$args.new_path", content: "$before.content"}
      then:
        - tool: notes.move
          args: {path: "$args.new_path", to: "$args.path"}
      kind: inverse
"""


def _setup(db_url: str, tmp_path: Path) -> tuple[Any, str]:
    """A note renamed and rewritten by an agent; returns the ledger and the run's id."""
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("alpha\n")
    ledger = reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")])
    run = ledger.start_run()

    def rename(path: str, new_path: str) -> dict[str, Any]:
        (notes / path).rename(notes / new_path)
        (notes / new_path).write_text("# Alpha\nalpha\n")
        return {"ok": True}

    run.call("notes.rename", {"path": "a.md", "new_path": "Alpha.md"}, rename,
             capture=lambda tool, args: {"content": (notes / args["path"]).read_text()})
    return ledger, run.id


def _undo(notes: Path, calls: list[dict[str, Any]], fail_at: int | None = None) -> Any:
    def compensate(call: dict[str, Any]) -> dict[str, Any]:
        calls.append(call)
        if call.get("part") == fail_at:
            raise RuntimeError("the server is down")
        args = call["args"]
        if call["tool"] == "notes.write":
            (notes / args["path"]).write_text(args["content"])
        else:
            (notes / args["path"]).rename(notes / args["to"])
        return {"ok": True}

    return compensate


def test_the_calls_run_in_turn_each_with_the_key_and_its_index(db_url: str, tmp_path: Path) -> None:
    ledger, run_id = _setup(db_url, tmp_path)
    with ledger:
        run = ledger.get_run(run_id)
        (action,) = run.plan().actions
        assert action.describe() == "compensate -> notes.write, then notes.move"
        assert action.to_dict()["then"] == [{"tool": "notes.move", "args": {"path": "Alpha.md", "to": "a.md"}}]
        calls: list[dict[str, Any]] = []
        report = run.rollback(_undo(tmp_path / "notes", calls))
        assert report.compensated == [0]
        key = action.compensation.idempotency_key if action.compensation else ""
        assert [(c["tool"], c["idempotency_key"], c["part"], c["parts"]) for c in calls] == [
            ("notes.write", f"{key}:0", 0, 2), ("notes.move", f"{key}:1", 1, 2)]
        journal = [(e.type, e.data.get("part")) for e in run.events() if e.step == 0]
        assert journal[-3:] == [("compensating", 0), ("compensating", 1), ("compensated", None)]
    assert {p.name: p.read_text() for p in (tmp_path / "notes").iterdir()} == {"a.md": "alpha\n"}


def test_a_failed_call_is_tried_again_from_where_it_stopped(db_url: str, tmp_path: Path) -> None:
    ledger, run_id = _setup(db_url, tmp_path)
    with ledger:
        run = ledger.get_run(run_id)
        calls: list[dict[str, Any]] = []
        report = run.rollback(_undo(tmp_path / "notes", calls, fail_at=1), retry={"attempts": 2, "base_ms": 1})
        assert [f.step for f in report.failed] == [0]
        assert [c["part"] for c in calls] == [0, 1, 1]  # the second attempt did not write the note again
        failed = [e.data for e in run.events() if e.type == "compensation_failed"]
        assert [(d["part"], d["attempt"]) for d in failed] == [(1, 1), (1, 2)]
        calls.clear()
        report = run.rollback(_undo(tmp_path / "notes", calls))
        assert report.compensated == [0] and [c["part"] for c in calls] == [1]
    assert {p.name: p.read_text() for p in (tmp_path / "notes").iterdir()} == {"a.md": "alpha\n"}


KILLER = textwrap.dedent("""\
    import os, sys
    from pathlib import Path
    import reversi
    db, manifest, run_id, notes, die_at = sys.argv[1:6]
    def compensate(call):
        if call["part"] == int(die_at):
            os._exit(9)  # killed while the call is in flight: its answer never journaled
        args = call["args"]
        if call["tool"] == "notes.write":
            (Path(notes) / args["path"]).write_text(args["content"])
        else:
            (Path(notes) / args["path"]).rename(Path(notes) / args["to"])
    with reversi.open(db, manifests=[manifest]) as ledger:
        ledger.get_run(run_id).rollback(compensate)
""")


@pytest.mark.parametrize("die_at", [0, 1])
def test_a_rollback_killed_in_a_call_goes_on_from_that_call(db_url: str, tmp_path: Path, die_at: int) -> None:
    ledger, run_id = _setup(db_url, tmp_path)
    ledger.close()
    notes = tmp_path / "notes"
    killed = subprocess.run([sys.executable, "-c", KILLER, db_url, str(tmp_path / "tools.yaml"), run_id, str(notes),
                             str(die_at)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.get_run(run_id)
        assert run.steps()[0].status.value == "compensating"
        calls: list[dict[str, Any]] = []
        report = run.rollback(_undo(notes, calls))
        assert report.compensated == [0]
        assert [c["part"] for c in calls] == [0, 1][die_at:]  # the call in flight again, with its key; none before
    assert {p.name: p.read_text() for p in notes.iterdir()} == {"a.md": "alpha\n"}


def test_a_remote_worker_may_not_claim_an_undo_of_several_calls(db_url: str, tmp_path: Path) -> None:
    ledger, run_id = _setup(db_url, tmp_path)
    with ledger, pytest.raises(NotCompensable, match="undone by 2 calls in turn: a rollback makes them"):
        ledger.get_run(run_id).begin_compensation(0, worker="w1")


def test_a_secret_an_undo_passes_to_a_later_call_is_masked_in_the_plan_shown(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("""\
version: 1
tools:
  vault.rotate:
    sensitive: [args.token]
    compensation:
      tool: vault.revoke
      args: {id: "$result.id"}
      then:
        - {tool: vault.restore, args: {token: "$args.token"}}
""")
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.call("vault.rotate", {"token": "s3cr3t-token-value"}, lambda token: {"id": "k1"})
        shown = ledger.for_principal(Principal("ops", Role.ADMIN)).plan(run.id)
        sent = run.plan()  # what the rollback itself sends
    (action,) = shown.actions
    assert action.compensation is not None and action.compensation.then[0][0] == "vault.restore"
    assert "s3cr3t-token-value" not in json.dumps(shown.to_dict())
    assert "s3cr3t-token-value" in json.dumps(sent.to_dict())

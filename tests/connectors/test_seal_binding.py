"""A sealed result is bound to the step that made it, when the connector knows the step (the SDK's
`run.call`, the gateway's forward call): reported again as another step's result, it is not undone
there. So an agent that got genuine sealed results back cannot replay them into a run of its own
making, over HTTP, and make the operator's rollback undo them a second time elsewhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.connectors.conftest import Done, connectors_cli

import reversi
from reversi.connectors import connector, fs
from reversi.core.plan import compensation_key

KEY = "b" * 40


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    monkeypatch.setenv("REVERSI_FS_ROOT", str(folder))
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", KEY)
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    return folder


def _undo(run_id: str, step: int, result: object) -> Done:
    call = {"run_id": run_id, "step": step, "tool": "fs.restore", "original_tool": "fs.write_file",
            "args": {"result": result, "step": step}, "idempotency_key": compensation_key(run_id, step, "fs.restore")}
    return connectors_cli("compensate", stdin=json.dumps(call))


def test_a_result_the_sdk_sealed_is_undone_in_its_own_step_and_refused_in_another(
    root: Path, db_url: str
) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run(actor="writer")
        made = run.call("fs.write_file", {"path": "a.txt", "content": "agent's\n"}, fs.write_file)
    assert made["reversi_seal"]["args"]["reversi_call"] == {"run_id": run.id, "step": 0}

    replayed = _undo("run_replayed", 3, made)
    assert replayed.code == 1 and replayed.err.startswith("untrusted result: the result of fs.write_file was made by"
                                                          f" step 0 of {run.id}, not by the step being undone")
    assert (root / "a.txt").read_text() == "agent's\n"

    genuine = _undo(run.id, 0, made)
    assert genuine.code == 0, genuine.err
    assert not (root / "a.txt").exists()


def test_a_replayed_result_reported_over_the_sdk_is_not_undone_by_the_rollback(
    root: Path, db_url: str, rollback: Callable[..., Done]
) -> None:
    manifest = root.parent / "fs.yaml"
    manifest.write_text(connector("fs").manifest_text())
    with reversi.open(db_url) as ledger:
        first = ledger.start_run(actor="writer")
        made = first.call("fs.write_file", {"path": "a.txt", "content": "one\n"}, fs.write_file)
        second = ledger.start_run(actor="writer")
        second.begin("fs.write_file", {"path": "a.txt", "content": "one\n"}).succeeded(made)  # a replay

    done = rollback(second.id, manifest)
    assert done.code == 2, done.err
    report = done.json()
    assert report["compensated"] == [] and [f["step"] for f in report["failed"]] == [0]
    assert "not by the step being undone" in report["failed"][0]["error"]
    assert (root / "a.txt").read_text() == "one\n"

    assert rollback(first.id, manifest).json()["compensated"] == [0]
    assert not (root / "a.txt").exists()


def test_an_unbound_seal_is_undone_in_any_step(root: Path) -> None:
    made = fs.write_file(path="b.txt", content="made outside any run\n")  # the HTTP flow's agent, holding the key
    assert "reversi_call" not in made["reversi_seal"]["args"]
    assert _undo("run_any", 5, made).code == 0
    assert not (root / "b.txt").exists()


@pytest.mark.parametrize(("said", "taken"), [
    ("fs.restore_file", "fs.restore_file"), ("c.fs.restore_file", "c.fs.restore_file"),
    ("c.fs.delete", None), ("fs.delete", None), ("a b.fs.restore_file", None), (".fs.restore_file", None),
    (7, None), (None, None), ("c.d.fs.restore_file", None),
])
def test_the_gateways_name_for_an_undo_is_taken_only_when_it_names_the_tool_run(said: object, taken: object) -> None:
    from reversi.connectors._mcp import _journaled_name

    assert _journaled_name(said, "fs.restore_file") == taken

"""An sql undo acts only on what the connector sealed (issue 24, finding 2): a forged `sql.insert`
result (its images swapped for another snapshot, a crafted file planted in the snapshot folder, another
table, another tool's or another key's seal) deletes no row, whether `reversi-connectors compensate`
gets it from a plan or a `reversi-server` rollback job gets it from an agent that reported it over HTTP.
The agent's own sealed result is still undone, by the same job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.connectors.conftest import COMPENSATOR, READER, Done, compensation_calls, connectors_cli
from tests.connectors.test_sql import MANIFEST, SCHEMA, SEED, Target, _postgres_shop
from tests.server.conftest import ServerProcess, spawn_server, wait_for  # noqa: F401  (the fixture)

import reversi
from reversi.connectors import fs, sql
from reversi.engine.keys import create_key

SEAL = "reversi_seal"


@pytest.fixture
def target(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    """The shop's database, of the store's kind (a SQLite file, or a PostgreSQL schema), as the default."""
    monkeypatch.setenv("REVERSI_CONNECTOR_DIR", str(tmp_path / "connectors"))
    (tmp_path / "files").mkdir()
    monkeypatch.setenv("REVERSI_FS_ROOT", str(tmp_path / "files"))
    if db_url.startswith("sqlite"):
        found = Target("sqlite", f"sqlite:///{tmp_path}/shop.db")
        found.execute(*SCHEMA["sqlite"], *SEED)
        monkeypatch.setenv("REVERSI_SQL_URL", found.url)
        yield found
        return
    with _postgres_shop() as found:
        monkeypatch.setenv("REVERSI_SQL_URL", found.url)
        yield found


def _planted(document: dict[str, Any]) -> str:
    """Put `document` in the snapshot folder as the agent can, through fs: the bytes a write replaced."""
    text = json.dumps(document, sort_keys=True)
    fs.write_file(path="crafted.json", content=text)
    fs.write_file(path="crafted.json", content="overwritten")
    return hashlib.sha256(text.encode()).hexdigest()


def _forgeries(mine: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, dict[str, Any]]]:
    """Results an agent could report (as of the tool named), each aimed at rows its run never touched."""
    precious = sql.insert(table="items", rows=[{"id": 60, "name": "the operator's"}])
    tagged = sql.insert(table="tags", rows=[{"item_id": 60, "tag": "kept"}])
    deleted = sql.delete(table="items", key={"id": 2})
    updated = sql.update(table="items", key={"id": 3}, values={"qty": 1})
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", "another connector's key, 32 chars or more")
    elsewhere = sql.insert(table="items", rows=[{"id": 61, "name": "another connector's"}])
    monkeypatch.delenv("REVERSI_CONNECTOR_KEY")
    apple = sql.select(table="items", key={"id": 1})["row"]
    crafted = _planted({"db": mine["db"], "table": "items", "key": ["id"],
                        "rows": [{"key": {"id": 1}, "before": None, "after": apple}]})
    bare = {k: v for k, v in mine.items() if k != SEAL}
    # `images_sha256` too: where a result named its snapshot by a path and a digest, a forgery set both.
    swapped = {"keys": precious["keys"], "images": precious["images"], "images_sha256": precious["images"]}
    return {
        "another snapshot": ("sql.insert", {**bare, **swapped}),
        "another snapshot, the seal kept": ("sql.insert", {**mine, **swapped}),
        "a crafted file": ("sql.insert", {**bare, "keys": [{"id": 1}], "images": crafted, "images_sha256": crafted}),
        "a crafted file, the seal kept": (
            "sql.insert", {**mine, "keys": [{"id": 1}], "images": crafted, "images_sha256": crafted}),
        "another table": (
            "sql.insert", {**bare, "table": "tags", "keys": tagged["keys"], "images": tagged["images"],
                           "images_sha256": tagged["images"]}),
        "another tool's seal": ("sql.insert", deleted),
        "another key's seal": ("sql.insert", elsewhere),
        "a seal of nothing": (
            "sql.insert", {**bare, SEAL: {"v": 1, "tool": "sql.insert", "args": {}, "key": "x", "mac": "0" * 64}}),
        "an update it did not make": ("sql.update", {k: v for k, v in updated.items() if k != SEAL}),
    }


def _record(db_url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """A run: the agent's own insert, then each forgery reported as the result of a call of its tool."""
    with reversi.open(db_url, manifests=[str(MANIFEST)]) as ledger:
        run = ledger.start_run(actor="shop-agent")
        mine = run.call("sql.insert", {"table": "items", "rows": [{"id": 50, "name": "kiwi"}]}, sql.insert)
        forged = _forgeries(mine, monkeypatch)
        for tool, forgery in forged.values():
            run.call(tool, {"table": "items"}, lambda forgery=forgery, **_: forgery)
    return run.id, list(forged)


def _rows_but_kiwi(target: Target) -> dict[str, list[tuple[Any, ...]]]:
    rows = target.rows()
    return {**rows, "items": [r for r in rows["items"] if r[0] != 50]}


def test_reversi_connectors_compensate_refuses_every_forged_insert_result_and_deletes_nothing(
    db_url: str, target: Target, monkeypatch: pytest.MonkeyPatch, plan: Callable[[str, Path], Done]
) -> None:
    run_id, names = _record(db_url, monkeypatch)
    before = _rows_but_kiwi(target)
    calls = compensation_calls(plan(run_id, MANIFEST).json())
    assert [c["step"] for c in calls] == list(range(len(names), -1, -1))

    said = {}
    for call, name in zip(calls, reversed(names), strict=False):
        done = connectors_cli("compensate", stdin=json.dumps(call))
        said[name] = (done.code, done.err)
    for name, (code, err) in said.items():
        assert code == 1 and err.startswith("untrusted result: ") and err.count("\n") == 1, (name, err)
    assert said["another snapshot"][1] == (
        "untrusted result: the result carries no seal: it is not a result of sql.insert made by this connector\n")
    assert said["another snapshot, the seal kept"][1] == (
        "untrusted result: the result of sql.insert was changed after it was sealed\n")
    assert said["another tool's seal"][1] == (
        "untrusted result: the result is sealed as one of sql.delete, not of sql.insert\n")
    assert "sealed with another key" in said["another key's seal"][1]
    assert _rows_but_kiwi(target) == before and 50 in [r[0] for r in target.rows()["items"]]

    mine = connectors_cli("compensate", stdin=json.dumps(calls[-1]))
    assert mine.code == 0, mine.err
    assert target.rows() == before


def test_a_server_rollback_job_refuses_what_an_agent_forged_over_http_and_undoes_its_own_call(
    db_url: str, target: Target, monkeypatch: pytest.MonkeyPatch,
    spawn_server: Callable[[dict[str, str]], ServerProcess],  # noqa: F811
) -> None:
    with reversi.open(db_url) as ledger:
        agent_key = create_key(ledger.store, "shop-agent", "agent")[1]
        operator_key = create_key(ledger.store, "ops", "operator")[1]
    # The agent holds the connector's key (the HTTP flow): it calls the tool itself, then reports.
    mine = sql.insert(table="items", rows=[{"id": 50, "name": "kiwi"}])
    forged = _forgeries(mine, monkeypatch)
    before = _rows_but_kiwi(target)
    server = spawn_server({"REVERSI_COMPENSATOR_CMD": COMPENSATOR, "REVERSI_READER_CMD": READER,
                           "REVERSI_MANIFEST": str(MANIFEST)})

    with (httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent_key}"}, timeout=30) as agent,
          httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {operator_key}"}, timeout=30) as ops):
        run_id = agent.post("/v1/runs", json={}).json()["run_id"]
        for tool, result in [("sql.insert", mine), *forged.values()]:
            step = agent.post(f"/v1/runs/{run_id}/steps", json={"tool": tool, "args": {"table": "items"}})
            assert step.status_code == 201, step.text
            reported = agent.post(f"/v1/runs/{run_id}/steps/{step.json()['step']}/outcome",
                                  json={"status": "succeeded", "result": result})
            assert reported.status_code == 200, reported.text
        assert ops.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True}).status_code == 202
        job = wait_for(lambda: (j := ops.get(f"/v1/runs/{run_id}/rollback").json())["state"] == "done" and j,
                       "the rollback job to finish", timeout=120)

    report = job["report"]
    errors = {f["step"]: f["error"] for f in report["failed"]}
    assert all(e.startswith("untrusted result: ") for e in errors.values()), errors
    # The forgeries that name the row step 0 inserted stand (their undos were refused), so what came
    # before them on that row is held back rather than undone under them (the connector's resources:).
    held = {d["step"]: d["blocked_by"] for d in report["deferred"]}
    assert 0 in held and set(errors) | set(held) == set(range(len(forged) + 1)), report
    assert all(blockers and max(blockers) > step for step, blockers in held.items()), report
    assert report["compensated"] == [] and report["complete"] is False, report
    assert _rows_but_kiwi(target) == before and (50, "kiwi") in {r[:2] for r in target.rows()["items"]}  # as it was

"""The fs undo trusts only results this connector sealed. A result an agent reports over HTTP, or one
handed to `reversi-connectors compensate`, that was forged, altered, sealed under another key or made
in another root changes nothing anywhere; the genuine result of an agent given the connector's key is
still rolled back by the server's job."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.connectors.conftest import CONNECTORS, connectors_cli, files_under
from tests.server.conftest import ServerProcess, wait_for

import reversi
from reversi.connectors import _snapshots, fs

KEY = "k" * 40
OTHER_KEY = "o" * 40
ABSENT = {"exists": False, "type": None, "sha256": None, "size": None, "mode": None, "snapshot": None}
PLANTED = b"#!/bin/sh\necho planted\n"


@dataclass
class Places:
    root: Path  # REVERSI_FS_ROOT of the connector and of the server's compensator
    host: Path  # a folder of the host outside the root
    other: Path  # another root, where the same connector key once acted

    def outside(self) -> dict[str, Any]:
        return {"host": files_under(self.host), "other": files_under(self.other)}


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Places:
    found = Places(tmp_path / "root", tmp_path / "host", tmp_path / "other")
    for folder in (found.root, found.host, found.other):
        folder.mkdir()
    (found.root / "mine.txt").write_text("the root's own\n")
    for name in ("victim.txt", "victim2.txt"):
        (found.host / name).write_text(f"{name}: a host file the agent may not touch\n")
    (found.other / "theirs.txt").write_text("another root's file\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(found.root))
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", KEY)
    return found


def _state(path: Path) -> dict[str, Any]:
    """A file's state as fs results give it."""
    data = path.read_bytes()
    return {"exists": True, "type": "file", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
            "mode": f"{path.stat().st_mode & 0o7777:04o}", "snapshot": None}


def _forged_results(places: Places, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Results an agent might report for fs.write_file, each aimed outside the root."""
    sha = _snapshots.store(PLANTED)  # a blob the connector kept once (an agent can make it write one)
    plant = {"exists": True, "type": "file", "sha256": sha, "size": len(PLANTED), "mode": "0755", "snapshot": sha}
    unsealed_delete = {"root": str(places.host), "path": "victim.txt", "before": ABSENT,
                       "after": _state(places.host / "victim.txt")}
    fake_seal = {"root": str(places.host), "path": "planted.sh", "before": plant, "after": ABSENT,
                 "reversi_seal": {"v": 1, "tool": "fs.write_file", "args": {}, "key": "0123456789ab", "mac": "0" * 64}}
    genuine = fs.write_file(path="mine.txt", content="the agent's\n")
    altered = {**genuine, "root": str(places.host), "path": "victim2.txt", "before": ABSENT,
               "after": _state(places.host / "victim2.txt")}
    monkeypatch.setenv("REVERSI_FS_ROOT", str(places.other))
    foreign_root = fs.write_file(path="theirs.txt", content="sealed, but in another root\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(places.root))
    return [unsealed_delete, fake_seal, altered, foreign_root]


@pytest.fixture
def server(db_url: str, places: Places, tmp_path: Path) -> Iterator[Callable[[], tuple[ServerProcess, dict[str, str]]]]:
    """`reversi-server` with an agent key and an operator key, rolling back with `reversi-connectors compensate`."""
    started: list[ServerProcess] = []

    def start() -> tuple[ServerProcess, dict[str, str]]:
        with reversi.open(db_url) as ledger:
            keys = {"agent": ledger.create_key("agent", "agent", "acme")[1],
                    "operator": ledger.create_key("ops", "operator")[1]}
        env = {"REVERSI_MANIFEST": str(fs.CONNECTOR.manifest_path()),
               "REVERSI_COMPENSATOR_CMD": f"{CONNECTORS} compensate", "REVERSI_READER_CMD": f"{CONNECTORS} read",
               "REVERSI_FS_ROOT": str(places.root), "REVERSI_CONNECTOR_KEY": KEY}
        process = ServerProcess(db_url, env, tmp_path / "server.log")
        started.append(process)
        return process, keys

    yield start
    for process in started:
        process.signal(signal.SIGKILL)


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _report(agent: httpx.Client, results: list[dict[str, Any]], args: list[dict[str, Any]]) -> str:
    run_id = str(agent.post("/v1/runs", json={}).json()["run_id"])
    for n, (result, arguments) in enumerate(zip(results, args, strict=True)):
        assert agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "fs.write_file", "args": arguments}).is_success
        answer = agent.post(f"/v1/runs/{run_id}/steps/{n}/outcome", json={"status": "succeeded", "result": result})
        assert answer.is_success, answer.text
    return run_id


def _rolled_back(operator: httpx.Client, run_id: str) -> dict[str, Any]:
    started = operator.post(f"/v1/runs/{run_id}/rollback", json={"confirm": True})
    assert started.status_code == 202, started.text

    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = operator.get(f"/v1/runs/{run_id}/rollback").json()
        return job if job["state"] == "done" else None

    report: dict[str, Any] = wait_for(done, "the rollback job to finish")["report"]
    return report


def test_forged_results_reported_over_http_make_the_servers_rollback_act_nowhere(
    places: Places, server: Callable[[], tuple[ServerProcess, dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = _forged_results(places, monkeypatch)
    outside, root = places.outside(), files_under(places.root)
    process, keys = server()
    with _client(process.url, keys["agent"]) as agent, _client(process.url, keys["operator"]) as operator:
        run_id = _report(agent, forged, [{"path": str(r.get("path"))} for r in forged])
        report = _rolled_back(operator, run_id)

    assert places.outside() == outside and files_under(places.root) == root
    assert not (places.host / "planted.sh").exists()
    assert report["complete"] is False and report["compensated"] == []
    errors = {failure["step"]: failure["error"] for failure in report["failed"]}
    assert errors[0] == ("untrusted result: the result carries no seal: it is not a result of fs.delete or"
                         " fs.write_file made by this connector")
    assert errors[1].startswith("untrusted result: the result was sealed with another key (0123456789ab)")
    assert errors[2] == "untrusted result: the result of fs.write_file was changed after it was sealed"
    assert errors[3] == (f"bad argument result: the step acted in {places.other}; this connector's root is"
                         f" {places.root}")


def test_an_agent_given_the_connectors_key_reports_genuine_results_and_the_servers_job_undoes_them(
    places: Places, server: Callable[[], tuple[ServerProcess, dict[str, str]]]
) -> None:
    before = files_under(places.root)
    results = [fs.write_file(path="mine.txt", content="the agent's\n"), fs.write_file(path="new.txt", content="new")]
    process, keys = server()
    with _client(process.url, keys["agent"]) as agent, _client(process.url, keys["operator"]) as operator:
        run_id = _report(agent, results, [{"path": "mine.txt"}, {"path": "new.txt"}])
        report = _rolled_back(operator, run_id)

    assert report["complete"] is True and report["compensated"] == [1, 0], report
    assert files_under(places.root) == before


def _genuine_and_forged(places: Places, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, dict[str, Any]]]:
    """Compensation calls (tool, result) of every kind an undo must refuse."""
    written = fs.write_file(path="mine.txt", content="the agent's\n")
    made = fs.make_dir(path="made")
    moved = fs.move(source="mine.txt", destination="made/moved.txt")
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", OTHER_KEY)
    other_key = fs.write_file(path="made/other.txt", content="sealed with another key")
    monkeypatch.setenv("REVERSI_CONNECTOR_KEY", KEY)
    bare = {k: v for k, v in written.items() if k != "reversi_seal"}

    def resealed(**part: str) -> dict[str, Any]:
        return {**written, "reversi_seal": {**written["reversi_seal"], **part}}

    return {
        "unsealed": ("fs.restore", {**bare, "root": str(places.host), "path": "victim.txt", "before": ABSENT,
                                    "after": _state(places.host / "victim.txt")}),
        "altered path": ("fs.restore", {**written, "path": "made/moved.txt"}),
        "altered root": ("fs.restore", {**written, "root": str(places.host)}),
        "lone surrogate": ("fs.restore", {**written, "path": "\udcff"}),
        "mac not ascii": ("fs.restore", resealed(mac="\x80")),
        "key with escapes": ("fs.restore", resealed(key="\x1b[2J\n")),
        "tool with escapes": ("fs.restore", resealed(tool="\x1b]0;")),
        "altered move": ("fs.move_back", {**moved, "destination": "../host/victim.txt"}),
        "altered dir": ("fs.remove_dir", {**made, "path": "../host"}),
        "other key": ("fs.restore", other_key),
        "other tool": ("fs.restore", made),
        "move as write": ("fs.move_back", written),
        "seal not an object": ("fs.remove_dir", {**made, "reversi_seal": "trust me"}),
        "seal without mac": ("fs.remove_dir", {**made, "reversi_seal": {"tool": "fs.make_dir", "args": {}}}),
    }


@pytest.mark.parametrize("kind", ["unsealed", "altered path", "altered root", "lone surrogate", "mac not ascii",
                                  "altered move", "altered dir", "other key", "other tool", "move as write",
                                  "seal not an object", "seal without mac", "key with escapes", "tool with escapes"])
def test_compensate_refuses_a_result_it_did_not_seal_and_changes_nothing(
    places: Places, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    tool, result = _genuine_and_forged(places, monkeypatch)[kind]
    world = places.outside(), files_under(places.root)

    done = connectors_cli("compensate", stdin=json.dumps({"tool": tool, "args": {"result": result}, "step": 4}))

    assert done.code == 1 and done.out == "" and done.err.count("\n") == 1, done.err
    assert done.err.startswith("untrusted result: ") and "\x1b" not in done.err, done.err
    assert (places.outside(), files_under(places.root)) == world


def test_a_genuine_result_of_another_root_is_refused_with_the_roots_named(
    places: Places, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVERSI_FS_ROOT", str(places.other))
    theirs = fs.write_file(path="theirs.txt", content="changed in the other root\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(places.root))
    world = places.outside()

    done = connectors_cli("compensate", stdin=json.dumps({"tool": "fs.restore", "args": {"result": theirs}}))

    assert (done.code, done.err) == (1, f"bad argument result: the step acted in {places.other}; this connector's"
                                        f" root is {places.root}\n")
    assert places.outside() == world


def _compensate_capped(call: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`reversi-connectors compensate` with 1 GiB of address space and a deadline: a read of /dev/zero
    or of a FIFO fails the test instead of growing or hanging."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run([CONNECTORS, "compensate"], input=json.dumps(call), capture_output=True, text=True,
                          timeout=60, preexec_fn=cap, check=False)


@pytest.mark.parametrize("named", ["host file", "missing host file", "/dev/zero", "fifo", "digest of a host file"])
def test_restore_given_a_forged_snapshot_copies_nothing_hangs_on_nothing_and_tells_nothing(
    places: Places, named: str
) -> None:
    secret = places.host / "secret.txt"
    secret.write_text("a host secret\n")
    os.mkfifo(places.host / "fifo")
    snapshot = {"host file": str(secret), "missing host file": str(places.host / "nothing.txt"),
                "/dev/zero": "/dev/zero", "fifo": str(places.host / "fifo"),
                "digest of a host file": hashlib.sha256(secret.read_bytes()).hexdigest()}[named]
    before = {"exists": True, "type": "file", "sha256": snapshot, "size": 14, "mode": "0644", "snapshot": snapshot}
    forged = {"root": str(places.root), "path": "copied.txt", "before": before, "after": ABSENT}
    world = places.outside(), files_under(places.root)

    done = _compensate_capped({"tool": "fs.restore", "args": {"result": forged}, "step": 1})

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("untrusted result: the result carries no seal: it is not a result of fs.delete or"
                           " fs.write_file made by this connector\n")
    assert (places.outside(), files_under(places.root)) == world


def _tamper(blob: Path, places: Places, how: str) -> None:
    blob.unlink()
    if how == "link to a copy outside":
        (places.host / "copy").write_text("the root's own\n")
        blob.symlink_to(places.host / "copy")
    elif how == "dangling link":
        blob.symlink_to(places.host / "nothing")
    elif how == "link to /dev/zero":
        blob.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(blob)
    else:  # a sparse file of 1 TiB
        with blob.open("wb") as out:
            out.truncate(1 << 40)


@pytest.mark.parametrize("how", ["link to a copy outside", "dangling link", "link to /dev/zero", "fifo", "huge"])
def test_a_snapshot_tampered_with_in_the_connector_folder_is_refused_without_hanging_or_growing(
    places: Places, how: str
) -> None:
    deleted = fs.delete(path="mine.txt")
    sha = deleted["before"]["sha256"]
    _tamper(Path(_snapshots.connector_dir()) / "blobs" / sha, places, how)
    world = places.outside(), files_under(places.root)

    done = _compensate_capped({"tool": "fs.restore", "args": {"result": deleted}, "step": 0})

    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    if how in ("link to a copy outside", "dangling link", "link to /dev/zero"):  # whatever the link names
        assert done.stderr == f"no snapshot {sha} in the connector folder {_snapshots.connector_dir()}\n"
    else:
        assert done.stderr == f"snapshot {sha} is damaged: it is not the 15-byte file kept\n"
    assert (places.outside(), files_under(places.root)) == world

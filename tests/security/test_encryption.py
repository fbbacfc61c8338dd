"""Encryption at rest, on both stores: with REVERSI_ENCRYPTION_KEYS set, arguments, results, errors and
captures never reach the store's files in clear (the SQLite file and its WAL, a pg_dump of the schema);
a process without the key still lists and plans, saying which steps it cannot undo; the rollback that
needs a value works with the key; rotation moves every data key without rewriting values, under load and
after a kill -9; erasure makes a tenant's values unreadable and leaves others alone."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from tests.cli.conftest import reversi_cli
from tests.server.conftest import ServerProcess

import reversi
from reversi.core.envelope import Unreadable
from reversi.core.plan import ActionKind
from reversi.engine.keys import create_key
from reversi.errors import ConfigError

K1, K2 = (base64.b64encode(bytes([n]) * 32).decode() for n in (1, 2))
SECRETS = ("SECRET-ARG-4711", "SECRET-RESULT-0815", "SECRET-ERROR-1234")
MANIFEST = """
version: 1
tools:
  crm.create:
    compensation:
      tool: crm.delete
      args: {id: "$result.id", note: "$args.note"}
  pay.charge:
    requires_approval: true
    compensation:
      tool: pay.refund
      args: {id: "$result.id"}
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(MANIFEST)
    return path


def _keys(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("REVERSI_ENCRYPTION_KEYS", raising=False)
    else:
        monkeypatch.setenv("REVERSI_ENCRYPTION_KEYS", value)


def _record(db_url: str, manifest: Path, tenant: str = "acme") -> str:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run(actor="crm-agent", tenant=tenant)
        run.begin("crm.create", {"note": SECRETS[0]}).succeeded({"id": "c_1", "echo": SECRETS[1]})
        run.begin("crm.create", {"note": "x"}).failed(f"upstream said {SECRETS[2]}")
        return str(run.id)


def _store_bytes(db_url: str, tmp_path: Path) -> bytes:
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file())
    schema = re.search(r"search_path%3D([A-Za-z0-9_]+)", db_url) or re.search(r"search_path=([A-Za-z0-9_]+)",
                                                                             unquote(db_url))
    assert schema is not None, db_url
    base = db_url.split("?")[0]
    return subprocess.run(["pg_dump", "--data-only", f"--schema={schema.group(1)}", base], check=True,
                          capture_output=True, timeout=120).stdout


def test_no_value_reaches_the_store_in_clear_and_the_key_reads_them_back(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    run_id = _record(db_url, manifest)
    dumped = _store_bytes(db_url, tmp_path)
    assert [s for s in SECRETS if s.encode() in dumped] == []
    assert b"!enc1:dk_" in dumped and b"crm.create" in dumped  # the structure stays in clear
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        steps = ledger.get_run(run_id).snapshot().steps
    assert steps[0].args == {"note": SECRETS[0]} and steps[0].result == {"id": "c_1", "echo": SECRETS[1]}
    assert steps[1].error == f"upstream said {SECRETS[2]}"


def test_without_the_key_a_process_lists_and_plans_and_says_what_it_cannot_undo(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    run_id = _record(db_url, manifest)
    _keys(monkeypatch, None)
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        snap = ledger.get_run(run_id).snapshot()
        plan = ledger.get_run(run_id).plan()
    assert isinstance(snap.steps[0].args, Unreadable) and [s.status.value for s in snap.steps] == [
        "succeeded", "failed"]
    action = next(a for a in plan.actions if a.step == 0)
    assert action.kind is ActionKind.UNRECOVERABLE
    assert action.reason == "its values cannot be read: encrypted under key k1, which this process does not hold"
    done = reversi_cli("plan", run_id, "-m", str(manifest), cwd=tmp_path, env={"REVERSI_DB": db_url})
    assert done.returncode == 2 and "encrypted under key k1, which this process does not hold" in done.stdout


def test_the_rollback_that_needs_a_value_runs_with_the_key(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    run_id = _record(db_url, manifest)
    got = tmp_path / "call.json"
    keep = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.stdin.read())"
    keeper = f"{sys.executable} -c \"{keep}\" {got}"
    done = reversi_cli("rollback", run_id, "-m", str(manifest), "--compensator-cmd", keeper, "--json", cwd=tmp_path,
                       env={"REVERSI_DB": db_url, "REVERSI_ENCRYPTION_KEYS": f"k1={K1}"})
    assert done.returncode == 0, done.stderr
    assert json.loads(got.read_text())["args"] == {"id": "c_1", "note": SECRETS[0]}
    assert SECRETS[0].encode() not in _store_bytes(db_url, tmp_path)  # the undo's own events are sealed too


@pytest.mark.parametrize("value", ["k1", "k1=notbase64!", f"k1={base64.b64encode(b'short').decode()}",
                                   f"k1={K1},k1={K2}", "bad id!=" + K1, "@/nonexistent/keys", "!/bin/false", "!"])
def test_a_bad_key_setting_is_one_line_that_never_quotes_a_key(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, value)
    with pytest.raises(ConfigError) as caught:
        reversi.open(f"sqlite:///{tmp_path}/r.db")
    assert "\n" not in caught.value.message and K1 not in caught.value.message and K2 not in caught.value.message
    assert not (tmp_path / "r.db").exists()  # nothing opened


def test_keys_from_a_file_or_a_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "keys").write_text(f"k2={K2}\nk1={K1}\n")
    _keys(monkeypatch, f"@{tmp_path / 'keys'}")
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        assert ledger.store.vault.keyring is not None and ledger.store.vault.keyring.current == "k2"
    _keys(monkeypatch, f"!{sys.executable} -c \"print('k3={K1}')\"")
    with reversi.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        assert ledger.store.vault.keyring is not None and list(ledger.store.vault.keyring.keys) == ["k3"]


def test_a_value_an_agent_sends_that_looks_sealed_is_kept_as_sent(
    db_url: str, manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In clear mode and in sealed mode, text that looks like a sealed value is only text."""
    look_alike = {"a": "!enc1:dk_0000:AAAA", "sealed": {"fields": ["args"], "value": "!enc1:dk_1:AAAA"}}
    for keys in (None, f"k1={K1}"):
        _keys(monkeypatch, keys)
        with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
            run = ledger.start_run()
            run.begin("crm.create", look_alike).succeeded(look_alike)
            step = ledger.get_run(run.id).snapshot().steps[0]
            assert step.args == look_alike and step.result == look_alike


def test_rotation_moves_every_data_key_while_calls_go_on(
    db_url: str, manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    runs = [_record(db_url, manifest) for _ in range(12)]
    _keys(monkeypatch, f"k2={K2},k1={K1}")
    stop, recorded, failures = threading.Event(), [], []

    def agent() -> None:
        try:
            with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
                while not stop.is_set():
                    run = ledger.start_run()
                    run.begin("crm.create", {"note": SECRETS[0]}).succeeded({"id": "c"})
                    recorded.append(run.id)
        except Exception as exc:  # the test reports it
            failures.append(exc)

    thread = threading.Thread(target=agent)
    thread.start()
    try:
        with reversi.open(db_url) as ledger:
            first = ledger.rotate_data(batch=3)
    finally:
        stop.set()
        thread.join(120)
    assert not failures and first.moved == 12 and first.stuck == {}
    _keys(monkeypatch, f"k2={K2}")  # the old key can go now
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        for run_id in runs + recorded:
            assert ledger.get_run(run_id).snapshot().steps[0].args == {"note": SECRETS[0]}
        assert ledger.rotate_data().moved == 0


def test_a_rotation_killed_midway_is_finished_by_running_it_again(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    runs = [_record(db_url, manifest) for _ in range(30)]
    env = {**os.environ, "REVERSI_DB": db_url, "REVERSI_ENCRYPTION_KEYS": f"k2={K2},k1={K1}"}
    script = ("import reversi, sys\n"
              "with reversi.open() as ledger:\n"
              "    ledger.rotate_data(batch=2, on_batch=lambda n: (print(n, flush=True), sys.stdin.readline()))\n")
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=tmp_path)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "2"  # one batch committed; the child waits in the next
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "4"
    child.send_signal(signal.SIGKILL)
    child.wait(60)
    done = reversi_cli("keys", "rotate-data", "--json", cwd=tmp_path, env={"REVERSI_DB": db_url,
                                                                         "REVERSI_ENCRYPTION_KEYS": f"k2={K2},k1={K1}"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"current": "k2", "moved": 26, "stuck": {}}
    _keys(monkeypatch, f"k2={K2}")
    with reversi.open(db_url) as ledger:
        assert all(ledger.get_run(r).snapshot().steps[0].args == {"note": SECRETS[0]} for r in runs)


def test_erasing_a_tenant_makes_its_values_unreadable_and_leaves_others_alone(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    theirs = [_record(db_url, manifest, "acme") for _ in range(3)]
    other = _record(db_url, manifest, "globex")
    env = {"REVERSI_DB": db_url, "REVERSI_ENCRYPTION_KEYS": f"k1={K1}"}
    refused = reversi_cli("erase", "--tenant", "acme", cwd=tmp_path, env=env)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    done = reversi_cli("erase", "--tenant", "acme", "--yes", "--by", "dpo", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["erased"]) == sorted(theirs)
    again = json.loads(reversi_cli("erase", "--tenant", "acme", "--yes", "--json", cwd=tmp_path, env=env).stdout)
    assert again["erased"] == [] and sorted(again["already_erased"]) == sorted(theirs)
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        for run_id in theirs:
            run = ledger.get_run(run_id)
            step = run.snapshot().steps[0]
            assert isinstance(step.args, Unreadable) and "erased on" in step.args.reason
            assert step.status.value == "succeeded"  # the structure stays
            reason = next(a for a in run.plan().actions if a.step == 0).reason or ""
            assert reason.startswith("its values cannot be read: its values were erased on")
            assert [e.actor for e in run.events() if e.type == "values_erased"] == ["dpo"]
        assert ledger.get_run(other).snapshot().steps[0].args == {"note": SECRETS[0]}


def test_erasing_a_run_in_clear_says_so(db_url: str, manifest: Path, tmp_path: Path) -> None:
    run_id = _record(db_url, manifest)
    done = reversi_cli("erase", "--run", run_id, "--yes", cwd=tmp_path, env={"REVERSI_DB": db_url})
    assert done.returncode == 2
    assert f"{run_id}: its values were written in clear, before encryption was on: not erased" in done.stdout


def test_an_admin_erases_over_http_and_nobody_else_may(
    db_url: str, manifest: Path, monkeypatch: pytest.MonkeyPatch,
    spawn_server: Callable[[dict[str, str]], ServerProcess],
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    acme, globex = _record(db_url, manifest, "acme"), _record(db_url, manifest, "globex")
    with reversi.open(db_url) as ledger:
        keys = {name: create_key(ledger.store, name, role, tenant)[1] for name, role, tenant in (
            ("root", "admin", None), ("acme-admin", "admin", "acme"), ("ops", "operator", None),
            ("vic", "viewer", None))}
    server = spawn_server({"REVERSI_ENCRYPTION_KEYS": f"k1={K1}"})

    def erase(key: str, body: dict[str, object]) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/erase", json=body, headers={"Authorization": f"Bearer {keys[key]}"},
                          timeout=30)

    assert erase("root", {"tenant": "acme"}).status_code == 400  # no confirm: nothing erased
    assert erase("ops", {"tenant": "acme", "confirm": True}).status_code == 403
    assert erase("vic", {"tenant": "acme", "confirm": True}).status_code == 403
    assert erase("acme-admin", {"tenant": "globex", "confirm": True}).status_code == 403
    assert erase("acme-admin", {"run_id": globex, "confirm": True}).status_code == 404
    assert erase("root", {"tenant": "acme", "actor": "x", "confirm": True}).status_code == 400
    done = erase("acme-admin", {"actor": "crm-agent", "confirm": True, "by": "dpo"})
    assert done.status_code == 200, done.text
    assert done.json()["erased"] == [acme]
    with reversi.open(db_url) as ledger:
        assert isinstance(ledger.get_run(acme).snapshot().steps[0].args, Unreadable)
        assert ledger.get_run(globex).snapshot().steps[0].args == {"note": SECRETS[0]}


def test_an_erasure_killed_midway_is_finished_by_running_it_again(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keys(monkeypatch, f"k1={K1}")
    runs = [_record(db_url, manifest) for _ in range(9)]
    env = {**os.environ, "REVERSI_DB": db_url, "REVERSI_ENCRYPTION_KEYS": f"k1={K1}"}
    script = ("import reversi, sys\n"
              "with reversi.open() as ledger:\n"
              "    ledger.erase_values(tenant='acme', by='dpo', batch=2,\n"
              "                        on_batch=lambda n: (print(n, flush=True), sys.stdin.readline()))\n")
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=tmp_path)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "2"  # one batch erased and committed; the child waits
    child.send_signal(signal.SIGKILL)
    child.wait(60)
    done = reversi_cli("erase", "--tenant", "acme", "--yes", "--json", cwd=tmp_path,
                       env={"REVERSI_DB": db_url, "REVERSI_ENCRYPTION_KEYS": f"k1={K1}"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["erased"]) == 7 and len(report["already_erased"]) == 2
    with reversi.open(db_url) as ledger:
        for run_id in runs:
            run = ledger.get_run(run_id)
            assert isinstance(run.snapshot().steps[0].args, Unreadable)
            assert len([e for e in run.events() if e.type == "values_erased"]) == 1  # each run once


def test_a_text_answer_kept_beside_its_json_is_sealed_too(
    db_url: str, manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text a tool answered, kept beside the JSON read from it (`$result_text`), is a value like
    the result: sealed in the store, read back with the key."""
    from reversi.core.answers import TextAnswer

    _keys(monkeypatch, f"k1={K1}")
    text = '{"id": "c_9", "card": "SECRET-TEXT-5150"}'
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run(actor="crm-agent", tenant="acme")
        run.begin("crm.create", {"note": "n"}).succeeded(TextAnswer({"id": "c_9", "card": "SECRET-TEXT-5150"}, text))
    assert b"SECRET-TEXT-5150" not in _store_bytes(db_url, tmp_path)
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        (step,) = ledger.get_run(run.id).steps()
    assert step.result_text == text and step.result == {"id": "c_9", "card": "SECRET-TEXT-5150"}

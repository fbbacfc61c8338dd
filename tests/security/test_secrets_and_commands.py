"""Secrets and commands: a key's secret and a console session's token are never in the store (only
their hashes), secrets are compared in constant time, and no command a user configures (compensator,
verify, reader, gateway upstream) ever runs through a shell."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.gateway.conftest import GATEWAY, WAIT_S
from tests.server.conftest import ThreadServer
from tests.server.test_access import csrf_of, sign_in

import reversi
from reversi.engine.commands import command_check_undo, command_compensator, command_read_back
from reversi.engine.run import awaited
from reversi.server import create_app

SRC = Path(reversi.__file__).parent
RECORD = Path(__file__).parent / "record_argv.py"
REVERSI = Path(sys.executable).parent / "reversi"
# What a shell would act on; each names a file that must never appear.
HOSTILE = ["; touch pwned-1", "$(touch pwned-2)", "`touch pwned-3`", "| touch pwned-4", "&& touch pwned-5 #",
           "> pwned-6", "'\"; touch pwned-7; '", "\n touch pwned-8", "*"]


def dump(url: str) -> str:
    """Every row of every table of the store, as text."""
    with reversi.open(url) as ledger, ledger.store.read() as q:
        if url.startswith("sqlite:"):
            tables = q.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        else:
            tables = q.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
        return "\n".join(repr(row) for (table,) in tables for row in q.execute(f'SELECT * FROM "{table}"').fetchall())


def test_keys_and_console_sessions_are_in_the_store_only_as_hashes(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        keys = [ledger.create_key(name, role)[1] for name, role in (("agent-1", "agent"), ("admin-1", "admin"))]
        served = ThreadServer(create_app(ledger, run_jobs=False))
        try:
            with httpx.Client(base_url=served.url) as browser:
                assert sign_in(browser, keys[1]).status_code == 303
                token = csrf_of(browser.get("/halts").text)
                assert browser.post("/logout", data={"csrf": token}).status_code == 303
            with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {keys[0]}"}) as agent:
                assert agent.post("/v1/runs", json={}).status_code == 201
        finally:
            served.stop()
    stored = dump(db_url)
    for key in keys:
        secret = key.split("_", 2)[2]
        assert key not in stored and secret not in stored
        assert hashlib.sha256(secret.encode()).hexdigest() in stored  # what is kept instead
    assert token not in stored and hashlib.sha256(token.encode()).hexdigest() in stored


AUTH_MODULES = ["engine/keys.py", "engine/access.py", "server/console/session.py", "server/endpoint.py",
                "gateway/http.py", "store/keys.py", "store/sessions.py"]
SECRET_WORDS = ("secret", "sha256", "csrf", "token")


def test_secrets_are_compared_in_constant_time_and_looked_up_by_id_or_hash() -> None:
    for module in AUTH_MODULES:
        tree = ast.parse((SRC / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
                text = ast.unparse(node).lower()
                assert not any(word in text for word in SECRET_WORDS), f"{module}:{node.lineno}: {text}"
    calls = {module: [ast.unparse(node.func) for node in ast.walk(ast.parse((SRC / module).read_text()))
                      if isinstance(node, ast.Call)] for module in ("engine/keys.py", "server/console/session.py")}
    assert "hmac.compare_digest" in calls["engine/keys.py"]  # the key's secret against its stored hash
    assert "hmac.compare_digest" in calls["server/console/session.py"]  # a form's CSRF token
    for module in ("store/keys.py", "store/sessions.py"):
        sql = (SRC / module).read_text()
        assert "WHERE secret" not in sql and "secret_sha256 =" not in sql  # found by id; compared in Python


SPAWNERS = {"subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call",
            "subprocess.check_output", "asyncio.create_subprocess_exec", "StdioServerParameters"}
SHELLS = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
          "asyncio.create_subprocess_shell", "loop.subprocess_shell", "pty.spawn"}


def test_no_module_starts_a_shell_and_every_command_is_a_list_of_words() -> None:
    spawned = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            assert name not in SHELLS, where
            assert not any(k.arg == "shell" for k in node.keywords), where
            if name in SPAWNERS:
                spawned.append(where)
                first = node.args[0] if node.args else None
                assert not (isinstance(first, ast.Constant) and isinstance(first.value, str)), where
    assert any(s.startswith("engine/commands.py") for s in spawned)  # compensators, checks, readers
    assert any(s.startswith("gateway/upstream.py") for s in spawned)  # the gateway's upstreams


def recorder(tmp_path: Path) -> str:
    """A command line for `record_argv.py`, its own arguments full of shell metacharacters."""
    return shlex.join([sys.executable, str(RECORD), *HOSTILE])


def recorded(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]


def test_compensator_verify_and_reader_commands_get_metacharacters_as_plain_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECORD_TO", str(tmp_path / "record.jsonl"))
    call = {"tool": "files.delete", "args": {"path": HOSTILE}, "idempotency_key": "; touch pwned-9"}
    awaited(command_compensator(recorder(tmp_path))(call))
    awaited(command_check_undo(recorder(tmp_path))(call))
    awaited(command_read_back(recorder(tmp_path))("files.read", {"path": HOSTILE}))
    runs = recorded(tmp_path)
    assert [r["argv"] for r in runs] == [HOSTILE] * 3
    assert json.loads(str(runs[0]["stdin"])) == call
    assert not list(tmp_path.glob("pwned-*")) and not list(Path.cwd().glob("pwned-*"))


def test_a_rollback_from_the_cli_passes_the_steps_arguments_to_its_compensator_untouched(
    tmp_path: Path, manifest: Path
) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        run.call("github.create_repo", {"name": HOSTILE[1]}, lambda name: {"full_name": HOSTILE[0]})
    done = subprocess.run([str(REVERSI), "--db", db, "rollback", run.id, "-m", str(manifest), "--compensator-cmd",
                           recorder(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RECORD_TO": str(tmp_path / "record.jsonl")})
    assert done.returncode == 0, done.stderr
    [undo] = recorded(tmp_path)
    assert undo["argv"] == HOSTILE and json.loads(str(undo["stdin"]))["args"] == {"repo": HOSTILE[0]}
    assert not list(tmp_path.glob("pwned-*"))


def test_a_gateway_upstream_command_is_run_with_its_words_as_written(tmp_path: Path) -> None:
    flag = f"odd={recorder(tmp_path)}"
    done = subprocess.run([str(GATEWAY), "--upstream", flag, "--db", f"sqlite:///{tmp_path}/r.db"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=WAIT_S, stdin=subprocess.DEVNULL,
                          env={**os.environ, "RECORD_TO": str(tmp_path / "record.jsonl"), "RECORD_ARGV_ONLY": "1"})
    assert done.returncode == 1  # it answers no MCP: the gateway cannot start with it
    assert recorded(tmp_path)[0]["argv"] == HOSTILE
    assert not list(tmp_path.glob("pwned-*"))

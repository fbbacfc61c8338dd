"""`reversi doctor` reports what this process would use and what it finds looser than it should be:
exit 0 when nothing is, 1 naming each file and the chmod that fixes it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.cli.conftest import reversi_cli

import reversi

KEY = base64.b64encode(bytes(32)).decode()


def _doctor(tmp_path: Path, db_url: str, **env: str) -> tuple[int, dict[str, Any]]:
    done = reversi_cli("--db", db_url, "doctor", "--json", cwd=tmp_path, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_tight_store_passes_and_says_what_is_configured(db_url: str, tmp_path: Path) -> None:
    with reversi.open(db_url) as ledger:
        ledger.start_run()
    code, found = _doctor(tmp_path, db_url, REVERSI_ENCRYPTION_KEYS=f"k1={KEY}", REVERSI_RETENTION="90d")
    assert code == 0 and found["ok"] is True, found
    checks = {c["name"]: c for c in found["checks"]}
    assert checks["store"]["ok"] and checks["encryption at rest"]["detail"].startswith("on: new values sealed")
    assert checks["retention"]["detail"] == "settled runs opened over 90d ago are pruned"
    assert all(set(c) == {"name", "ok", "detail", "fix"} for c in checks.values())


def test_a_loosened_store_file_and_connector_folder_fail_naming_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "data" / "r.db"
    with reversi.open(f"sqlite:///{db}") as ledger:
        ledger.start_run()
    db.chmod(0o644)
    connectors = tmp_path / "conn"
    (connectors / "blobs").mkdir(parents=True, mode=0o700)
    (connectors / "seal.key").write_text("k")
    (connectors / "seal.key").chmod(0o640)
    done = reversi_cli("--db", f"sqlite:///{db}", "doctor", cwd=tmp_path,
                       env={"REVERSI_CONNECTOR_DIR": str(connectors)})
    assert done.returncode == 1, done.stdout
    assert f"BAD  mode of {db}: 0644: others than its owner can reach it" in done.stdout
    assert f"fix: chmod 600 {db}" in done.stdout and f"fix: chmod 600 {connectors / 'seal.key'}" in done.stdout
    assert done.stdout.rstrip().endswith("something is looser than it should be: see BAD above")


def test_an_unreachable_store_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    code, found = _doctor(tmp_path, "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert code == 1 and found["ok"] is False
    assert found["checks"][0]["name"] == "store"

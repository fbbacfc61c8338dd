"""A viewer key, for a person who should only look: it reads what an operator of its tenant reads (runs,
events, plans, checkpoints, approvals, rollback progress) and changes nothing: every write is 403, over
real HTTP, on both stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import ServerProcess

import reversi
from reversi.engine.keys import create_key

MANIFEST = """
version: 1
tools:
  pay.charge:
    compensation: {tool: pay.refund, args: {id: "$result.id"}}
"""


@pytest.fixture
def site(db_url: str, tmp_path: Path, spawn_server: Callable[[dict[str, str]], ServerProcess],
         ) -> tuple[ServerProcess, dict[str, str], dict[str, str]]:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(tmp_path / "tools.yaml")]) as ledger:
        keys = {name: create_key(ledger.store, name, role, tenant)[1] for name, role, tenant in (
            ("vic", "viewer", "acme"), ("val", "viewer", None), ("bot", "agent", "acme"))}
        runs = {}
        for tenant in ("acme", "globex"):
            run = ledger.acting_as("bot").start_run(tenant=tenant, actor="bot")
            run.begin("pay.charge", {"amount": 5, "api_key": "sk_live_VIEWERSECRET"}).succeeded({"id": "ch_1"})
            runs[tenant] = str(run.id)
    server = spawn_server({"REVERSI_MANIFEST": str(tmp_path / "tools.yaml")})
    return server, keys, runs


def test_a_viewer_reads_its_tenant_and_changes_nothing(
    site: tuple[ServerProcess, dict[str, str], dict[str, str]],
) -> None:
    server, keys, runs = site
    run = runs["acme"]
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {keys['vic']}"}, timeout=30) as http:
        for path in ("/v1/runs", f"/v1/runs/{run}", f"/v1/runs/{run}/plan", f"/v1/runs/{run}/events",
                     f"/v1/runs/{run}/checkpoints", "/v1/approvals"):
            answer = http.get(path)
            assert answer.status_code == 200, (path, answer.text)
            assert "VIEWERSECRET" not in answer.text
        assert [r["run_id"] for r in http.get("/v1/runs").json()["items"]] == [run]  # its tenant's, all of them
        assert http.get(f"/v1/runs/{run}/rollback").status_code == 404  # no job yet: a read, not refused
        assert http.get(f"/v1/runs/{runs['globex']}").status_code == 403  # another tenant's
        writes = [("POST", "/v1/runs", {}), ("POST", f"/v1/runs/{run}/steps", {"tool": "pay.charge", "args": {}}),
                  ("POST", f"/v1/runs/{run}/steps/0/outcome", {"status": "failed", "error": "x"}),
                  ("POST", f"/v1/runs/{run}/checkpoints", {"name": "x"}),
                  ("POST", f"/v1/runs/{run}/rollback", {"confirm": True}),
                  ("POST", f"/v1/runs/{run}/steps/0/resolve", {"status": "failed", "note": "x"}),
                  ("POST", "/v1/approvals/apr_" + "0" * 32 + "/approve", {}), ("POST", "/v1/halt", {"reason": "x"}),
                  ("POST", "/v1/resume", {}), ("POST", "/v1/keys", {"name": "x", "role": "admin"}),
                  ("GET", "/v1/halts", None), ("GET", "/v1/keys", None), ("DELETE", "/v1/keys/abcdefabcdef", None)]
        for method, path, body in writes:
            answer = http.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert "the key of vic is viewer" in answer.json()["error"]["message"], (method, path)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {keys['val']}"}, timeout=30) as http:
        assert sorted(r["run_id"] for r in http.get("/v1/runs").json()["items"]) == sorted(runs.values())


def test_a_viewer_key_is_made_from_the_cli_and_an_unknown_role_is_one_line(tmp_path: Path) -> None:
    from tests.cli.conftest import reversi_cli

    made = reversi_cli("keys", "create", "vic", "--role", "viewer", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout and '"role": "viewer"' in made.stdout.replace('":"', '": "')
    bad = reversi_cli("keys", "create", "x", "--role", "VIEWER", cwd=tmp_path)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "viewer" in bad.stderr

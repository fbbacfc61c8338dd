"""Sensitive values (secrets by key name, paths a manifest marks, secrets inside text) are never shown in
clear: not by `show`, `plan`, `export`, `approvals`, a rollback's report, the HTTP API or the server's log.
The journal keeps them, so the undo that needs one still gets it."""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.cli.conftest import reversi_cli
from tests.server.conftest import ServerProcess

import reversi
from reversi.core.json_values import JSON
from reversi.core.sensitive import MASK_RE, Masker, is_sensitive_name
from reversi.engine.keys import create_key

API_KEY, PASSWORD, URL_TOKEN = "sk_live_51HxAPIkeyVALUE", "hunter2-correct-horse", "tok_IN_URL_998877"
RESULT_TOKEN, ERROR_KEY, EMAIL = "sess_RESULT_556677", "ERRKEY_123456789", "ann.customer@example.com"
SECRETS = (API_KEY, PASSWORD, URL_TOKEN, RESULT_TOKEN, ERROR_KEY, EMAIL)
MANIFEST = """
version: 1
tools:
  crm.create_contact:
    sensitive: [args.customer.email]
    compensation:
      tool: crm.delete_contact
      args: {id: "$result.id", api_key: "$args.api_key"}
  http.get:
    effect: read
"""
# A compensator that keeps what it was given: the undo must get the clear value.
KEEPER = ("import json, sys, pathlib; call = json.load(sys.stdin); "
          "pathlib.Path(sys.argv[1]).write_text(json.dumps(call))")


def _seed(db_url: str, manifest: Path) -> str:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run(actor="crm-agent")
        args = {"api_key": API_KEY, "password": PASSWORD, "callback": f"https://hooks.example/x?token={URL_TOKEN}",
                "customer": {"email": EMAIL, "name": "Ann"}}
        run.begin("crm.create_contact", args).succeeded({"id": "c_1", "session_token": RESULT_TOKEN})
        run.begin("http.get", {"url": "https://api.example/v1"}).failed(
            f"GET https://api.example/v1?key={ERROR_KEY} answered 500; retried with {API_KEY}")
        return str(run.id)


def _clean(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.fixture
def seeded(db_url: str, tmp_path: Path) -> tuple[str, Path]:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(MANIFEST)
    return _seed(db_url, manifest), manifest


def test_no_cli_output_shows_a_secret_and_one_value_masks_alike_everywhere(
    db_url: str, seeded: tuple[str, Path], tmp_path: Path
) -> None:
    run_id, manifest = seeded
    env = {"REVERSI_DB": db_url, "REVERSI_MANIFEST": str(manifest)}  # the paths it marks are masked where it is loaded
    outputs = {}
    for args in (["show", run_id], ["show", run_id, "--json"], ["plan", run_id, "-m", str(manifest)],
                 ["plan", run_id, "-m", str(manifest), "--json"], ["export"], ["export", "--run", run_id]):
        done = reversi_cli(*args, cwd=tmp_path, env=env)
        assert done.returncode in (0, 2), done.stderr
        assert _clean(done.stdout + done.stderr) == [], (args, done.stdout)
        outputs[" ".join(args[:2])] = done.stdout
    shown = json.loads(reversi_cli("show", run_id, "--json", cwd=tmp_path, env=env).stdout)
    step = shown["steps"][0]
    assert MASK_RE.fullmatch(step["args"]["api_key"]) and MASK_RE.fullmatch(step["args"]["customer"]["email"])
    assert step["args"]["customer"]["name"] == "Ann" and step["result"]["id"] == "c_1"
    assert step["args"]["api_key"] != step["args"]["password"]  # two values, two masks
    # the error quotes the API key: it is masked there with the same mask as in the arguments
    assert step["args"]["api_key"] in shown["steps"][1]["error"]
    exported = [json.loads(line) for line in outputs["export --run"].splitlines()]
    intended = next(e for e in exported if e["type"] == "intended" and e["step"] == 0)
    assert intended["data"]["args"]["api_key"] == step["args"]["api_key"]
    plan = json.loads(reversi_cli("plan", run_id, "-m", str(manifest), "--json", cwd=tmp_path, env=env).stdout)
    assert plan["actions"][-1]["args"]["api_key"] == step["args"]["api_key"]


def test_the_undo_gets_the_clear_value_and_its_report_shows_it_masked(
    db_url: str, seeded: tuple[str, Path], tmp_path: Path
) -> None:
    run_id, manifest = seeded
    got = tmp_path / "call.json"
    done = reversi_cli("rollback", run_id, "-m", str(manifest), "--json", "--compensator-cmd",
                       f"{sys.executable} -c '{KEEPER}' {got}", cwd=tmp_path, env={"REVERSI_DB": db_url})
    assert done.returncode == 0, done.stderr
    assert json.loads(got.read_text())["args"] == {"id": "c_1", "api_key": API_KEY}
    assert _clean(done.stdout + done.stderr) == []


def test_manifest_check_warns_when_an_undo_needs_a_sensitive_value(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(MANIFEST)
    done = reversi_cli("manifest", "check", "tools.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "crm.create_contact: its compensation needs $args.api_key, a sensitive value" in said, said
    assert "kept in the journal" in said and "masked wherever it is shown" in said


def test_the_http_api_and_the_servers_log_show_no_secret(
    db_url: str, tmp_path: Path, spawn_server: Callable[[dict[str, str]], ServerProcess]
) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(MANIFEST)
    run_id = _seed(db_url, manifest)
    with reversi.open(db_url) as ledger:
        key = create_key(ledger.store, "olu", "operator")[1]
    server = spawn_server({"REVERSI_MANIFEST": str(manifest)})
    headers = {"Authorization": f"Bearer {key}"}
    for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events", f"/v1/runs/{run_id}/plan"):
        answer = httpx.get(server.url + path, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert _clean(answer.text) == [] and MASK_RE.search(answer.text), path
    assert server.signal(signal.SIGTERM) == 0
    said = list(iter(lambda: server.lines.get(timeout=30), None))  # every line, up to its end
    assert said and _clean("\n".join(said)) == []


def test_log_lines_mask_secrets_in_urls_and_credentials() -> None:
    import logging

    from reversi.core.printable import TerminalFormatter

    record = logging.LogRecord("reversi", logging.WARNING, __file__, 1,
                               "job failed: GET https://u:pw-SECRET@h/x?api_key=%s Bearer %s", (ERROR_KEY, API_KEY),
                               None)
    line = TerminalFormatter("%(message)s").format(record)
    assert "pw-SECRET" not in line and ERROR_KEY not in line and API_KEY not in line
    assert len(MASK_RE.findall(line)) == 3


# -- the rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "secret"), [
    ("password", True), ("Password", True), ("api-key", True), ("X-Api-Key", True), ("github_token", True),
    ("db_password", True), ("Authorization", True), ("card number", True), ("client_secret", True),
    ("token_count", False), ("idempotency_key", False), ("tokens", False), ("key", False), ("monkey", False),
    ("name", False), ("secretary", False),
])
def test_which_key_names_hold_secrets(name: str, secret: bool) -> None:
    assert is_sensitive_name(name) is secret


def test_secrets_inside_text_are_masked_and_the_rest_is_kept() -> None:
    m = Masker(b"k" * 32)
    shown = m.text("curl -H 'Authorization: Bearer abcdefgh12345' https://me:pa55word@db.example:5432/x"
                   "?user=ann&access_token=t0k3n&page=2 card 4242 4242 4242 4242, order 1234 5678 9012 3456")
    for secret in ("abcdefgh12345", "pa55word", "t0k3n", "4242 4242 4242 4242"):
        assert secret not in shown
    for kept in ("user=ann", "page=2", "order 1234 5678 9012 3456", "db.example:5432"):
        assert kept in shown
    assert Masker(b"k" * 32).mask("x") == m.mask("x") != Masker(b"j" * 32).mask("x")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                           lambda kids: st.lists(kids, max_size=4)
                                           | st.dictionaries(st.text(max_size=12), kids, max_size=4), max_leaves=30))
def test_hostile_values_never_break_masking(text: str, value: JSON) -> None:
    m = Masker(b"k" * 32)
    shown = m.value({"password": text, "nested": value, text: value})
    assert shown["password"] == (m.mask(text) if text else text)
    assert text not in m.text(f"error: {text}") or len(text) < 4 or not text.strip()


def test_huge_and_deep_values_are_masked() -> None:
    m = Masker(b"k" * 32)
    huge = "a" * 2_000_000 + "?key=" + "b" * 1000
    deep: JSON = {"password": "x"}
    for _ in range(500):
        deep = {"d": deep}
    assert "b" * 1000 not in m.text(huge)  # RE2: linear in the text, whatever it holds
    assert "'x'" not in repr(m.value(deep))
    assert re.search(r"«sensitive:", json.dumps(m.value(deep), ensure_ascii=False))


def test_prunes_archive_holds_the_values_masked(db_url: str, tmp_path: Path) -> None:
    with reversi.open(db_url) as ledger:
        run = ledger.start_run()
        run.begin("crm.create_contact", {"api_key": API_KEY}).failed(f"rejected {API_KEY}")
    done = reversi_cli("prune", "--older-than", "0s", "--export", "archive.jsonl", cwd=tmp_path,
                       env={"REVERSI_DB": db_url})
    assert done.returncode == 0, done.stderr
    archived = (tmp_path / "archive.jsonl").read_text()
    assert API_KEY not in archived and MASK_RE.search(archived)

"""The rules every way of making and revoking keys keeps: `local` (in any case or disguise) is nobody's
key name, and the last admin key that can manage a set of keys cannot be revoked over HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from tests.server.conftest import Site

import reversi
from reversi.store.keys import KeyRow

REVERSI = Path(sys.executable).with_name("reversi")
# `local` as an admin might type it, and as one might disguise it: case, spaces, full-width letters,
# a Cyrillic o (U+043E), a zero-width space, a trailing newline.
LOCAL_NAMES = ["local", "LOCAL", "Local", "lOcAl", " local", "local ", " Local ", "\tlocal", "ｌｏｃａｌ", "l\u043ecal",
               "local\u200b", "local\n"]


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REVERSI), "--db", db_url, *args], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if not k.startswith("REVERSI_")})


def key_names(site: Site) -> set[str]:
    return {k.name for k in site.ledger.list_keys()}


@pytest.mark.parametrize("name", LOCAL_NAMES)
def test_no_admin_can_mint_a_key_named_local_over_http(site: Site, name: str) -> None:
    site.add_key("acme-admin", "admin", "acme")
    before = key_names(site)
    for who, tenant in (("admin", None), ("acme-admin", "acme")):
        answer = site.client(who).post("/v1/keys", json={"name": name, "role": "admin", "tenant": tenant})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "bad_input"
    assert key_names(site) == before


def test_local_is_refused_by_name_and_any_other_name_still_works(site: Site) -> None:
    answer = site.client("admin").post("/v1/keys", json={"name": "LOCAL", "role": "agent"})
    assert answer.status_code == 400
    assert "reserved" in answer.json()["error"]["message"] and "local" in answer.json()["error"]["message"]
    for name in ("locale", "local-ops", "my.local", "localhost"):
        assert site.client("admin").post("/v1/keys", json={"name": name, "role": "agent"}).status_code == 201, name


@pytest.mark.parametrize("name", ["local", "LOCAL", " Local ", "ｌｏｃａｌ"])
def test_the_cli_refuses_a_key_named_local_in_one_line(db_url: str, name: str) -> None:
    made = cli(db_url, "keys", "create", name, "--role", "admin")
    assert made.returncode == 1, made.stdout
    assert made.stderr.startswith("reversi: error:") and len(made.stderr.splitlines()) == 1, made.stderr
    assert "reserved" in made.stderr and "Traceback" not in made.stderr
    with reversi.open(db_url) as ledger:
        assert ledger.list_keys() == []


def test_a_key_named_local_from_before_the_rule_acts_as_nobody(site: Site) -> None:
    """A store may hold such a key from an older version: it is refused, and cannot continue the runs
    the CLI and SDK opened as `local`."""
    secret = secrets.token_urlsafe(32)
    with site.ledger.store.write() as q:
        q.insert_key(KeyRow("oldlocalkey0", "LOCAL", "admin", None, hashlib.sha256(secret.encode()).hexdigest(),
                            "2024-01-01T00:00:00Z", None))
    key = f"rvk_oldlocalkey0_{secret}"
    site.ledger.start_run("run_of_local")
    answer = site.client().post("/v1/runs", json={}, headers={"Authorization": f"Bearer {key}",
                                                             "Reversi-Run-Id": "run_of_local"})
    assert answer.status_code == 401 and "reserved" in answer.json()["error"]["message"]


# -- the last admin key ----------------------------------------------------------------------------


def test_the_last_admin_key_cannot_revoke_itself_over_http(make_site: object) -> None:
    site = make_site()  # type: ignore[operator]
    site.add_key("admin", "admin")
    site.add_key("ops", "operator")
    own = next(k for k in site.ledger.list_keys() if k.name == "admin")
    answer = site.client("admin").delete(f"/v1/keys/{own.key_id}")
    assert answer.status_code == 409, answer.text
    assert "last active admin key" in answer.json()["error"]["message"]
    assert site.client("admin").get("/v1/keys").status_code == 200, "the admin still holds the store"

    site.add_key("second", "admin")
    assert site.client("admin").delete(f"/v1/keys/{own.key_id}").status_code == 200, "another admin remains"
    assert site.client("admin").get("/v1/keys").status_code == 401
    second = next(k for k in site.ledger.list_keys() if k.name == "second")
    assert site.client("second").delete(f"/v1/keys/{second.key_id}").status_code == 409


def test_a_tenant_keeps_an_admin_unless_an_admin_of_every_tenant_remains(make_site: object) -> None:
    site = make_site()  # type: ignore[operator]
    site.add_key("acme-admin", "admin", "acme")
    site.add_key("acme-agent", "agent", "acme")
    acme = next(k for k in site.ledger.list_keys() if k.name == "acme-admin")
    assert site.client("acme-admin").delete(f"/v1/keys/{acme.key_id}").status_code == 409
    site.add_key("root", "admin")
    assert site.client("acme-admin").delete(f"/v1/keys/{acme.key_id}").status_code == 200, "root still manages acme"
    root = next(k for k in site.ledger.list_keys() if k.name == "root")
    assert site.client("root").delete(f"/v1/keys/{root.key_id}").status_code == 409


def test_the_cli_on_the_store_revokes_the_last_admin_key_only_when_told_to(db_url: str) -> None:
    made = cli(db_url, "keys", "create", "dana", "--role", "admin", "--json")
    key_id = json.loads(made.stdout)["id"]
    refused = cli(db_url, "keys", "revoke", key_id)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "last active admin key" in refused.stderr and "--force" in refused.stderr
    done = cli(db_url, "keys", "revoke", key_id, "--force")
    assert done.returncode == 0, done.stderr
    with reversi.open(db_url) as ledger:
        assert [k.revoked_at is not None for k in ledger.list_keys()] == [True]

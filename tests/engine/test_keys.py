"""API keys: created once, stored as a hash, authenticated in constant time, revoked at once."""

from __future__ import annotations

import pytest

from reversi.engine.keys import (
    Role,
    authenticate,
    create_key,
    is_reserved_name,
    list_keys,
    revoke_key,
    store_has_keys,
)
from reversi.errors import BadInput, Conflict, NotFound
from reversi.store.factory import open_store


def test_a_key_authenticates_as_its_principal_until_revoked(db_url: str) -> None:
    with open_store(db_url) as store:
        assert not store_has_keys(store)
        row, key = create_key(store, "billing-agent", "agent", tenant="acme")
        principal = authenticate(store, key)
        assert principal is not None
        assert (principal.name, principal.role, principal.tenant) == ("billing-agent", Role.AGENT, "acme")
        assert store_has_keys(store)
        revoke_key(store, row.key_id)
        assert authenticate(store, key) is None
        assert store_has_keys(store)  # SPEC 7: only a store that holds no keys at all serves keyless


def test_only_a_hash_of_the_secret_is_stored(db_url: str) -> None:
    with open_store(db_url) as store:
        row, key = create_key(store, "ops", "operator")
        secret = key[len("rvk_") + len(row.key_id) + 1:]  # the secret itself may contain "_"
        assert secret not in repr(list_keys(store))
        assert "secret" not in str(row.to_dict()) and "sha256" not in str(row.to_dict())


@pytest.mark.parametrize("tamper", [
    lambda k: k[:-1] + ("A" if k[-1] != "A" else "B"),   # wrong secret
    lambda k: k.replace("rvk_", "rvx_"),                  # not a key at all
    lambda k: "rvk_nosuchkey000_" + k[len("rvk_") + 13:],  # unknown id, the right secret
    lambda k: "",
])
def test_anything_but_the_exact_key_is_refused(db_url: str, tamper: object) -> None:
    with open_store(db_url) as store:
        _, key = create_key(store, "ops", "admin")
        assert authenticate(store, tamper(key)) is None  # type: ignore[operator]


@pytest.mark.parametrize(("name", "role", "tenant"), [
    ("has space", "agent", None), ("ok", "root", None), ("ok", "agent", ""), ("", "agent", None)])
def test_bad_key_parameters_are_refused(db_url: str, name: str, role: str, tenant: str | None) -> None:
    with open_store(db_url) as store:
        with pytest.raises(BadInput):
            create_key(store, name, role, tenant)
        assert list_keys(store) == []


def test_revoking_an_unknown_key_is_not_found(db_url: str) -> None:
    with open_store(db_url) as store, pytest.raises(NotFound):
        revoke_key(store, "nosuchkey000")


@pytest.mark.parametrize("name", ["local", "LOCAL", "Local", " local ", "ｌｏｃａｌ", "local\n"])
def test_local_is_no_key_name_in_any_case_or_spacing(db_url: str, name: str) -> None:
    with open_store(db_url) as store:
        with pytest.raises(BadInput, match="reserved"):
            create_key(store, name, "admin")
        assert list_keys(store) == []
        assert not is_reserved_name("locale") and not is_reserved_name("local-ops")


def test_the_last_admin_key_of_a_reach_is_kept_unless_the_store_says_so(db_url: str) -> None:
    with open_store(db_url) as store:
        root, _ = create_key(store, "root", "admin")
        acme, _ = create_key(store, "acme-admin", "admin", "acme")
        agent, _ = create_key(store, "bot", "agent")
        revoke_key(store, agent.key_id)  # not an admin: nothing to keep
        with pytest.raises(Conflict, match="last active admin key that can manage the store's keys"):
            revoke_key(store, root.key_id)
        revoke_key(store, acme.key_id, "acme")  # root still manages acme's keys
        assert revoke_key(store, root.key_id, last_admin=True).revoked_at is not None
        assert revoke_key(store, root.key_id).revoked_at is not None, "revoking a revoked key changes nothing"

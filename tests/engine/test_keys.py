"""API keys: created once, stored as a hash, authenticated in constant time, revoked at once."""

from __future__ import annotations

import pytest

from reversi.engine.keys import Role, authenticate, create_key, list_keys, revoke_key, store_has_keys
from reversi.errors import BadInput, NotFound
from reversi.store.base import open_store


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

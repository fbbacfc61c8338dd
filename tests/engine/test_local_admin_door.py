"""The local admin's door (`Ledger.as_local_admin`: the CLI, a stdio gateway) is a principal's door like
any other: who it journals as acting, and what only whoever holds the store may do, are decided there.
A key's principal is never the process's REVERSI_ACTOR, and never reaches past its tenant or its role."""

from __future__ import annotations

import pytest

import reversi
from reversi.core.scopes import Selection
from reversi.core.surfaces import Surface
from reversi.engine.keys import LOCAL_ADMIN, Principal, Role
from reversi.errors import ConfigError, Conflict, Forbidden


def test_the_local_admin_acts_as_reversi_actor_and_a_key_as_its_own_name(
        ledger: reversi.Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERSI_ACTOR", "ops-on-call")
    local = ledger.as_local_admin(Surface.CLI)
    keyed = ledger.for_principal(Principal("root", Role.ADMIN, key_id="key_1"), Surface.API)

    assert local.add_halt("freeze").by == "ops-on-call"
    assert keyed.add_halt("freeze").by == "root"  # the server's environment does not speak for a key
    assert local.add_halt("freeze", by="alice").by == "alice"
    assert {h.principal for h in local.halts()} == {ledger.principal, "root"}
    assert local.lift_halts(by="bob") == 3
    lifted = [e for e in ledger.export() if e.type == "halt_lifted"]
    assert {e.actor for e in lifted} == {"bob"}


def test_only_the_local_admin_revokes_the_last_admin_key(ledger: reversi.Ledger) -> None:
    local = ledger.as_local_admin(Surface.CLI)
    row, _ = local.create_key("root", "admin")
    keyed = ledger.for_principal(Principal("root", Role.ADMIN, key_id=row.key_id), Surface.API)

    with pytest.raises(Forbidden, match="only the local admin"):
        keyed.revoke_key(row.key_id, last_admin=True)
    with pytest.raises(Conflict, match="last active admin key"):
        local.revoke_key(row.key_id)
    assert local.list_keys()[0].revoked_at is None  # refused: nothing changed
    assert local.revoke_key(row.key_id, last_admin=True).revoked_at is not None


def test_the_whole_stores_upkeep_is_for_an_admin_of_every_tenant(ledger: reversi.Ledger) -> None:
    confined = ledger.for_principal(Principal("acme-admin", Role.ADMIN, tenant="acme", key_id="key_2"), Surface.API)
    operator = ledger.for_principal(Principal("ops", Role.OPERATOR, key_id="key_3"), Surface.API)
    agent = ledger.for_principal(Principal("bot", Role.AGENT, key_id="key_4"), Surface.API)

    for door in (confined, operator):
        with pytest.raises(Forbidden):
            door.rotate_data()
        with pytest.raises(Forbidden):
            door.pruning()
    assert operator.drills() == []
    for door in (agent, confined):  # a drill's evidence is the whole store's, in clear
        with pytest.raises(Forbidden):
            door.drills()
    with pytest.raises(ConfigError, match="needs the keys"):  # the local admin passes the door
        ledger.as_local_admin(Surface.CLI).rotate_data()


def test_the_journal_is_exported_to_those_who_read_it(ledger: reversi.Ledger) -> None:
    mine = ledger.for_principal(Principal("bot", Role.AGENT, key_id="key_4"), Surface.API)
    run, _ = mine.open_run(actor="bot")
    run.begin("jobs.create", {"name": "a"}).succeeded({"id": "j1"})
    other = ledger.start_run(actor="someone")
    confined = ledger.for_principal(Principal("acme-ops", Role.OPERATOR, tenant="acme", key_id="key_5"), Surface.API)

    assert [e.type for e in mine.export(run.id)] == ["run_opened", "intended", "succeeded"]
    with pytest.raises(Forbidden, match="belongs to another principal"):
        mine.export(other.id)  # said at once, not at the first event read
    for door in (mine, confined):  # every run's journal is for a key that reads every run
        with pytest.raises(Forbidden, match="name one run"):
            door.export()
    everything = ledger.as_local_admin(Surface.CLI).export()
    assert {e.run_id for e in everything} == {run.id, other.id}


def test_the_sdks_operator_actions_are_the_local_admins(ledger: reversi.Ledger,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERSI_ACTOR", "ops-on-call")
    halt = ledger.add_halt("freeze", tenant="acme")
    assert (halt.by, halt.principal, halt.scope.tenant) == ("ops-on-call", ledger.principal, "acme")
    assert ledger.lift_halts(tenant="globex") == 0  # of exactly that tenant: acme's stays
    assert ledger.lift_halts(tenant="acme", by="erin") == 1
    row, _ = ledger.create_key("root", "admin")
    with pytest.raises(Conflict):  # the door's rule, from the SDK as from the CLI
        ledger.revoke_key(row.key_id)
    assert ledger.revoke_key(row.key_id, last_admin=True).revoked_by == ledger.principal


def test_a_server_without_keys_does_not_speak_for_its_callers_with_its_own_reversi_actor(
        ledger: reversi.Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERSI_ACTOR", "whoever-started-the-server")
    for surface in (Surface.API, Surface.CONSOLE, Surface.GATEWAY):
        assert ledger.for_principal(LOCAL_ADMIN, surface).add_halt("freeze").by == "local"


def test_containment_is_journaled_as_the_key_that_asked_whatever_actor_it_names(ledger: reversi.Ledger) -> None:
    local = ledger.as_local_admin(Surface.CLI)
    boss, _ = local.create_key("boss", "admin")
    local.create_key("leaky", "agent")
    keyed = ledger.for_principal(Principal("boss", Role.ADMIN, key_id=boss.key_id), Surface.API)

    keyed.submit_scope_rollback(Selection(key="leaky", actor="bot"), has_compensator=True, actor="alice",
                                contain=True)
    (halt,) = local.halts()
    assert (halt.by, halt.principal) == ("boss", "boss")
    assert {k.name: k.revoked_by for k in local.list_keys()} == {"boss": None, "leaky": "boss"}


def test_whoever_holds_the_store_contains_even_the_last_admin_key(ledger: reversi.Ledger) -> None:
    local = ledger.as_local_admin(Surface.CLI)
    local.create_key("boss", "admin")  # leaked: the last admin key, revoked all the same from the store
    report = local.rollback_scope(Selection(key="boss", actor="leaky"), None, contain=True, reason="leak",
                                  actor="dana")
    assert report.contained and report.complete
    (halt,) = local.halts()
    assert (halt.reason, halt.by) == ("leak", "dana")
    assert local.list_keys()[0].revoked_by == "dana"

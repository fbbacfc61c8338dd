"""Listings paged and filtered by the store's own queries: events after a seq, approvals by status
and by their run's tenant with a cursor, keys and halts by tenant, and a page of runs' snapshots at
once."""

from __future__ import annotations

import pytest

import reversi
from reversi.core.models import EventType
from reversi.engine import approvals, halts
from reversi.engine.keys import create_key, list_keys, revoke_key
from reversi.errors import ApprovalRequired, NotFound


def wire(run: reversi.Run, amount: int) -> str:
    with pytest.raises(ApprovalRequired) as asked:
        run.begin("payments.wire", {"amount": amount})
    return asked.value.approval_id


def test_a_runs_events_are_read_a_page_at_a_time_after_a_seq(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for n in range(5):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    every = [e.seq for e in run.events()]
    with ledger.store.read() as q:
        assert [e.seq for e in q.run_events(run.id, limit=3)] == every[:3]
        assert [e.seq for e in q.run_events(run.id, after=every[2], limit=3)] == every[3:6]
        assert [e.seq for e in q.run_events(run.id, after=every[-1])] == []


def test_approvals_are_filtered_by_status_and_tenant_and_paged_pending_first(ledger: reversi.Ledger) -> None:
    acme, other = ledger.start_run(tenant="acme"), ledger.start_run(tenant="other")
    first, second, third = wire(acme, 1), wire(acme, 2), wire(acme, 3)
    elsewhere = wire(other, 4)
    ledger.deny(first, note="no")
    ledger.approve(second)
    store = ledger.store

    acme_ids = [a.approval_id for a in approvals.list_approvals(store, tenant="acme")]
    assert acme_ids == [third, first, second]  # pending first, then oldest first
    assert [a.approval_id for a in approvals.list_approvals(store, "pending")] == [third, elsewhere]
    assert [a.approval_id for a in approvals.list_approvals(store, "denied", tenant="acme")] == [first]
    assert [a.approval_id for a in approvals.list_approvals(store, "approved", tenant="other")] == []

    pages, after = [], None
    while True:
        page = approvals.list_approvals(store, tenant="acme", after=after, limit=2)
        pages.append([a.approval_id for a in page])
        if len(page) < 2:
            break
        after = approvals.approval_page_key(page[-1])
    assert pages == [[third, first], [second]]


def test_keys_are_listed_and_revoked_within_a_tenant(ledger: reversi.Ledger) -> None:
    acme, _ = create_key(ledger.store, "acme-bot", "agent", "acme")
    free, _ = create_key(ledger.store, "root", "admin")
    assert [k.key_id for k in list_keys(ledger.store, "acme")] == [acme.key_id]
    assert {k.key_id for k in list_keys(ledger.store)} == {acme.key_id, free.key_id}
    with pytest.raises(NotFound):
        revoke_key(ledger.store, free.key_id, tenant="acme")
    assert revoke_key(ledger.store, acme.key_id, tenant="acme").revoked_at is not None


def test_a_page_of_runs_snapshots_is_read_at_once_as_each_would_be_alone(ledger: reversi.Ledger) -> None:
    runs = [ledger.start_run() for _ in range(3)]
    runs[0].begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    runs[2].begin("stripe.create_charge", {"amount": 2}).failed("declined")
    runs[2].begin("stripe.create_charge", {"amount": 3})
    with ledger.store.read() as q:
        together = q.snapshots([r.record for r in runs])
    assert together == [r.snapshot() for r in runs]


def test_halts_are_listed_by_tenant_in_sql_and_so_are_those_added_before_the_tenant_column(
    ledger: reversi.Ledger,
) -> None:
    acme = ledger.add_halt("acme's", tenant="acme", by="dana")
    everyone = ledger.add_halt("everyone's", by="dana")
    with ledger.store.write() as q:  # as a store migrated from before the column holds its halts
        q.append_system(EventType.HALT_ADDED, "dana", "halt_old", {"reason": "old", "scope": {"tenant": "acme"}})
        q.append_system(EventType.HALT_ADDED, "dana", "halt_older", {"reason": "older", "scope": {}})
    with ledger.store.read() as q:
        columns = q.execute("SELECT halt_id, tenant FROM system_events ORDER BY seq").fetchall()
    assert [tuple(c) for c in columns] == [(acme.halt_id, "acme"), (everyone.halt_id, ""), ("halt_old", None),
                                           ("halt_older", None)]
    assert [h.halt_id for h in halts.list_halts(ledger.store, "acme")] == [acme.halt_id, "halt_old"]
    assert halts.list_halts(ledger.store, "other") == []
    assert len(ledger.halts()) == 4
    assert halts.lift_halts(ledger.store, None, "dana", "acme", principal="dana") == 2
    assert [h.halt_id for h in ledger.halts()] == [everyone.halt_id, "halt_older"]


def test_runs_are_found_by_text_in_their_id_actor_or_tenant_whatever_its_case(ledger: reversi.Ledger) -> None:
    billing = ledger.start_run("run_Billing_1", actor="Billing-Agent", tenant="acme")
    support = ledger.start_run("run_support_1", actor="support", tenant="ac%me_2")
    with ledger.store.read() as q:
        def found(*contains: tuple[str, str]) -> set[str]:
            return {r.run_id for r in q.list_runs(contains=contains)}

        assert found(("any", "billing")) == {billing.id}
        assert found(("actor", "AGENT")) == {billing.id}
        assert found(("tenant", "ac")) == {billing.id, support.id}
        assert found(("tenant", "%")) == {support.id}  # a wildcard of LIKE is only itself
        assert found(("tenant", "c_")) == set()
        assert found(("any", "run_"), ("actor", "supp")) == {support.id}

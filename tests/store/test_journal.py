"""The journal as the store keeps it: numbering, export order, JSON round trips, run listings."""

from __future__ import annotations

import re
from typing import Any

import pytest

import reversi
from reversi.errors import ApprovalRequired, Halted

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def charge(run: reversi.Run, amount: int) -> int:
    handle = run.begin("stripe.create_charge", {"amount": amount})
    handle.succeeded({"id": f"ch_{amount}"})
    return handle.index


def test_seq_increases_by_one_within_each_run_whatever_is_journaled(ledger: reversi.Ledger) -> None:
    a = ledger.start_run(actor="billing-agent")
    b = ledger.start_run(actor="support-agent")
    charge(a, 1)
    charge(b, 2)
    with pytest.raises(ApprovalRequired) as asked:
        a.begin("payments.wire", {"amount": 9})  # approval_requested + refused
    ledger.approve(asked.value.approval_id, by="dana")
    a.begin("payments.wire", {"amount": 9}).succeeded({"id": "w_1"})
    a.begin("stripe.create_charge", {"amount": 3}).uncertain("timed out")
    a.resolve(2, "succeeded", {"id": "ch_3"}, note="found it", actor="dana")
    ledger.add_halt("frozen", tool="email.*")
    with pytest.raises(Halted):
        b.begin("email.send", {"to": "a@b.c"})
    ledger.start_run(a.id)  # run_continued
    a.rollback(compensate=lambda call: {"ok": True})

    for run in (a, b):
        events = run.events()
        assert [e.seq for e in events] == list(range(len(events)))
        assert {e.run_id for e in events} == {run.id}
        assert all(RFC3339_UTC.fullmatch(e.at) for e in events), [e.at for e in events]
        assert [e.at for e in events] == sorted(e.at for e in events)
        assert events[0].type == "run_opened"
    assert "halt_added" not in [e.type for e in a.events()], "halts belong to no run"


def test_export_gives_runs_oldest_first_and_each_run_in_seq_order(ledger: reversi.Ledger) -> None:
    runs = [ledger.start_run(actor=f"agent-{i}") for i in range(3)]
    for amount in range(4):
        for run in reversed(runs):  # interleave the writes of the three runs
            charge(run, amount)

    exported = list(ledger.export())

    order = list(dict.fromkeys(e.run_id for e in exported))
    assert order == [r.id for r in runs]
    for run in runs:
        mine = [e for e in exported if e.run_id == run.id]
        assert [e.seq for e in mine] == list(range(len(mine)))
        assert [e.to_dict() for e in mine] == [e.to_dict() for e in ledger.export(run.id)]
    cut = exported[len(exported) // 2].at
    assert [e.to_dict() for e in ledger.export(since=cut)] == [e.to_dict() for e in exported if e.at >= cut]


def test_exported_events_carry_exactly_the_documented_keys(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run, 1)

    [opened, intended, succeeded] = [e.to_dict() for e in ledger.export(run.id)]

    keys = {"run_id", "seq", "step", "type", "at", "actor", "data"}
    assert set(opened) == set(intended) == set(succeeded) == keys
    assert opened["step"] is None and intended["step"] == 0 and succeeded["step"] == 0
    assert intended["data"]["args"] == {"amount": 1}
    assert succeeded["data"]["result"] == {"id": "ch_1"}


ODD_VALUES: list[Any] = [
    {"name": "Zoë – ☃ 名前", "quote": 'it\'s "quoted"; DROP TABLE runs; --', "nul": "a\u0000b"},
    {"big": 2**62, "neg": -(2**62), "float": 0.1, "exp": 1e-300, "bools": [True, False, None]},
    [[[]], {}, "", 0],
    "just a string",
    12345,
    [None],
]


@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_arguments_and_results_come_back_exactly_as_given(db_url: str, value: Any) -> None:
    with reversi.open(db_url) as writer:
        run = writer.start_run(labels={"team": "ünïcode"})
        run.begin("any.tool", {"value": value}).succeeded(value)  # arguments are named; a result is any JSON

    with reversi.open(db_url) as reader:
        [step] = reader.get_run(run.id).steps()
        assert step.args == {"value": value}
        assert step.result == value
        assert reader.get_run(run.id).record.labels == {"team": "ünïcode"}


def test_runs_are_listed_newest_first_with_counts_and_filters(ledger: reversi.Ledger) -> None:
    old = ledger.start_run(actor="billing-agent", tenant="acme")
    charge(old, 1)
    old.begin("stripe.create_charge", {"amount": 2}).uncertain("timeout")
    new = ledger.start_run(actor="support-agent", tenant="globex")
    new.begin("email.send", {"to": "a@b.c"}).failed("bounced")

    listed = ledger.list_runs()
    assert [s.run.run_id for s in listed][:2] == [new.id, old.id]
    [summary] = [s for s in listed if s.run.run_id == old.id]
    assert (summary.steps, summary.standing, summary.unresolved) == (2, 1, 1)

    assert [s.run.run_id for s in ledger.list_runs(reversi.RunFilter(tenant="acme"))] == [old.id]
    assert [s.run.run_id for s in ledger.list_runs(reversi.RunFilter(actor="support-agent"))] == [new.id]
    assert [s.run.run_id for s in ledger.list_runs(reversi.RunFilter(status="uncertain"))] == [old.id]
    assert [s.run.run_id for s in ledger.list_runs(reversi.RunFilter(status="failed"))] == [new.id]
    assert len(ledger.list_runs(reversi.RunFilter(limit=1))) == 1
    with pytest.raises(reversi.errors.BadInput):
        ledger.list_runs(reversi.RunFilter(status="sideways"))


def test_a_second_connection_sees_every_committed_write_at_once(db_url: str, manifest: Any) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as one, reversi.open(db_url) as two:
        run = one.start_run()
        charge(run, 5)
        assert [s.status.value for s in two.get_run(run.id).steps()] == ["succeeded"]
        two.add_halt("stop", tool="stripe.*")
        with pytest.raises(Halted, match="kill switch: stop"):
            run.begin("stripe.create_charge", {"amount": 6})


def test_an_unknown_run_is_not_found_and_a_bad_id_is_bad_input(ledger: reversi.Ledger) -> None:
    with pytest.raises(reversi.errors.NotFound, match="run_missing"):
        ledger.get_run("run_missing")
    with pytest.raises(reversi.errors.NotFound):
        list(ledger.export("run_missing"))
    for bad in ["run_", "nope", "run_a/b", "run_" + "x" * 65]:
        with pytest.raises(reversi.errors.BadInput):
            ledger.get_run(bad)
        with pytest.raises(reversi.errors.BadInput):
            ledger.start_run(bad)
    assert ledger.list_runs() == []


def test_generated_run_ids_are_long_and_distinct(ledger: reversi.Ledger) -> None:
    ids = {ledger.start_run().id for _ in range(20)}

    assert len(ids) == 20
    assert all(re.fullmatch(r"run_[a-z2-7]{16,}", i) for i in ids)

"""The runs that need a person, counted in the store over every run (the console's triage bar), and
found by text in their labels and their steps' tools (its search)."""

from __future__ import annotations

import reversi
from reversi.engine.keys import Principal, Role

ADMIN = Principal("dana", Role.ADMIN)


def test_attention_is_counted_over_every_run_not_the_latest_few(ledger: reversi.Ledger) -> None:
    """More runs than any page or scan: the oldest ones, which need a person, are counted too."""
    as_bot = ledger.acting_as("bot")
    for n in range(520):
        run = as_bot.start_run(tenant="acme")
        step = run.begin("stripe.create_charge", {"amount": n})
        step.uncertain("timed out") if n < 30 else step.succeeded({"id": f"ch_{n}"})
    failing = as_bot.start_run(tenant="acme")
    failing.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_x"})
    failing.rollback(compensate=lambda call: (_ for _ in ()).throw(RuntimeError("no")), retry={"attempts": 1})
    settled = as_bot.start_run(tenant="other")
    settled.begin("stripe.create_charge", {"amount": 2}).uncertain("timed out")
    settled.resolve(0, "failed", note="it never ran")
    counts = ledger.for_principal(ADMIN).attention_counts()
    assert counts == {"any": 31, "unresolved": 30, "undo_failed": 1, "approval": 0}
    confined = ledger.for_principal(Principal("olu", Role.OPERATOR, tenant="other")).attention_counts()
    assert confined == {"any": 0, "unresolved": 0, "undo_failed": 0, "approval": 0}
    own = ledger.for_principal(Principal("someone-else", Role.AGENT)).attention_counts()
    assert own["any"] == 0  # an agent counts its own runs only


def test_search_finds_labels_and_tools_and_takes_pattern_characters_literally(ledger: reversi.Ledger) -> None:
    tagged = ledger.start_run(labels={"incident": "INC-4471"})
    tagged.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "a/x"})
    charged = ledger.start_run()
    charged.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    door = ledger.for_principal(ADMIN)

    def found(text: str) -> list[str]:
        return [s.run.run_id for s in door.list_runs(contains={"any": text}).items]

    assert found("inc-4471") == [tagged.id]
    assert found("stripe.") == [charged.id]
    assert found("GITHUB.CREATE") == [tagged.id]
    assert found("stripe%") == [] and found("str_pe") == []  # LIKE's wildcards are only text here

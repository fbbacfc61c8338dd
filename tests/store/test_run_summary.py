"""Listings count a run's steps from each step's last status event: the same answer as the full fold."""

from __future__ import annotations

from pathlib import Path

import reversi
from reversi.core.models import RunSummary


def test_the_summary_query_agrees_with_the_derived_statuses_for_every_status(db_url: str, manifest: Path) -> None:
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run(actor="billing-agent")
        run.begin("stripe.create_charge", {"amount": 1})                                    # 0 intended
        run.begin("stripe.create_charge", {"amount": 2}).succeeded({"id": "ch_2"})          # 1 succeeded
        run.begin("stripe.create_charge", {"amount": 3}).failed("declined")                 # 2 failed
        run.begin("stripe.create_charge", {"amount": 4}).uncertain("timeout")               # 3 uncertain
        run.begin("stripe.create_charge", {"amount": 5}).uncertain("timeout")               # 4 resolved: succeeded
        run.resolve(4, "succeeded", {"id": "ch_5"}, note="found it")
        run.begin("stripe.create_charge", {"amount": 6}).uncertain("timeout")               # 5 resolved: failed
        run.resolve(5, "failed", note="not there")
        run.begin("stripe.create_charge", {"amount": 7}).succeeded({"id": "ch_7"})          # 6 compensating
        run.begin_compensation(6)
        run.begin("stripe.create_charge", {"amount": 8}).succeeded({"id": "ch_8"})          # 7 compensated
        work = run.begin_compensation(7)
        run.complete_compensation(work, ok=True)
        run.begin("stripe.create_charge", {"amount": 9}).succeeded({"id": "ch_9"})          # 8 compensation_failed
        work = run.begin_compensation(8)
        run.complete_compensation(work, ok=False, error="503")
        empty = ledger.start_run()

        with ledger.store.read() as q:
            for record in (run.record, empty.record):
                snap = q.snapshot(record.run_id)
                assert snap is not None
                assert q.run_summary(record) == RunSummary.of(record, [s.status for s in snap.steps])
            summary = q.run_summary(run.record)
    assert (summary.steps, summary.standing, summary.unresolved) == (9, 4, 2)
    assert summary.statuses == {"intended", "succeeded", "failed", "uncertain", "compensating", "compensated",
                                "compensation_failed"}

"""The fault campaign in CI: 200 seeds, 25 for each target (the SDK's recording, the CLI's rollback, the
server, the gateway) on each back end, every one SIGKILLed at its seed's moment, recovered and checked.

`make soak` runs thousands (see soak.py); a failure here names its seed and how to run it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.reliability.campaign import Cell
from tests.reliability.workload import TARGETS, cell

CI_SEEDS = 200
SLOWEST_FIRST = ["gateway", "server", "cli", "sdk"]  # so that two workers end about together


@pytest.mark.parametrize("target", SLOWEST_FIRST)
def test_every_seed_of_the_campaign_keeps_the_invariants_through_its_kills_and_recovery(
    target: str, db_url: str, tmp_path: Path
) -> None:
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    seeds = [s for s in range(CI_SEEDS) if cell(s) == (target, backend)]
    with Cell(target, db_url, tmp_path / "cell") as running:
        results = [running.run(seed) for seed in seeds]
    broken = [f"seed {r.seed}: {v}  (reproduce: {r.reproduce()})" for r in results for v in r.violations]
    assert broken == []
    assert sorted(SLOWEST_FIRST) == sorted(TARGETS) and len(results) == 25
    assert sum(r.kills for r in results) >= 20, "the kills the seeds arm mostly land"


def test_the_campaign_catches_a_recorder_that_calls_before_it_journals(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAMPAIGN_SABOTAGE", "call-first")
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    seeds = [s for s in range(CI_SEEDS) if cell(s) == ("sdk", backend)][:3]
    with Cell("sdk", db_url, tmp_path / "cell") as running:
        results = [running.run(seed) for seed in seeds]
    assert {v.kind for r in results for v in r.violations} >= {"journal-before-call"}

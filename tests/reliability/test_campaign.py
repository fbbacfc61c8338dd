"""The fault campaign in CI: 160 seeds, 20 for each target (the SDK's recording, the CLI's rollback, the
server, the gateway) on each back end, every one SIGKILLed at its seed's moment, recovered and checked.

`make soak` runs thousands (see soak.py); a failure here names its seed and how to run it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.reliability.campaign import Cell
from tests.reliability.workload import BACKENDS, TARGETS, cell

CI_SEEDS = 160  # CI's 20 minutes: `make soak` runs thousands
CHUNKS = 2  # each cell's seeds in two tests: two workers share the work more evenly
# The costliest cells first (measured), so that the last tests to start are short.
ORDER = [("gateway", "postgres"), ("gateway", "sqlite"), ("server", "postgres"), ("cli", "postgres"),
         ("server", "sqlite"), ("cli", "sqlite"), ("sdk", "postgres"), ("sdk", "sqlite")]


def seeds_of(target: str, backend: str, chunk: int) -> list[int]:
    mine = [s for s in range(CI_SEEDS) if cell(s) == (target, backend)]
    return mine[chunk::CHUNKS]


@pytest.mark.parametrize(("target", "db_url", "chunk"),
                         [pytest.param(t, b, c, id=f"{t}-{b}-{c + 1}of{CHUNKS}") for t, b in ORDER
                          for c in range(CHUNKS)], indirect=["db_url"])
def test_every_seed_of_the_campaign_keeps_the_invariants_through_its_kills_and_recovery(
    target: str, db_url: str, chunk: int, tmp_path: Path
) -> None:
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    seeds = seeds_of(target, backend, chunk)
    with Cell(target, db_url, tmp_path / "cell") as running:
        results = [running.run(seed) for seed in seeds]
    broken = [f"seed {r.seed}: {v}  (reproduce: {r.reproduce()})" for r in results for v in r.violations]
    assert broken == []
    # A guard on the harness, not on Reversi: a seed whose moment falls after its process has ended
    # (a fast CLI rollback, say) kills nothing, so on an idle machine some cells' chunks land 10 of 13.
    assert sum(r.kills for r in results) >= 0.6 * len(results), "the kills the seeds arm mostly land"


def test_the_ci_seeds_are_160_spread_evenly_over_the_targets_and_back_ends() -> None:
    counts = {(t, b): sum(len(seeds_of(t, b, c)) for c in range(CHUNKS)) for t, b in ORDER}
    assert sorted(ORDER) == sorted((t, b) for t in TARGETS for b in BACKENDS)
    assert set(counts.values()) == {20} and sum(counts.values()) == CI_SEEDS


def test_the_campaign_catches_a_recorder_that_calls_before_it_journals(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAMPAIGN_SABOTAGE", "call-first")
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    seeds = [s for s in range(CI_SEEDS) if cell(s) == ("sdk", backend)][:3]
    with Cell("sdk", db_url, tmp_path / "cell") as running:
        results = [running.run(seed) for seed in seeds]
    assert {v.kind for r in results for v in r.violations} >= {"journal-before-call"}


def test_one_postgresql_seed_asked_for_without_a_postgresql_url_is_an_error_not_an_empty_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.reliability import soak

    monkeypatch.delenv(soak.PG_ENV, raising=False)
    seed = next(s for s in range(CI_SEEDS) if cell(s)[1] == "postgres")
    assert soak.main(["--seed", str(seed)]) == 1
    assert capsys.readouterr().err == (f"seed {seed} runs on PostgreSQL: set {soak.PG_ENV}=postgresql://... "
                                       "to run it\n")

"""Undo windows through the CLI, on both stores: `reversi plan` shows the time left and a closed window,
`--deadline-first` undoes the step whose window closes soonest first but never one a standing step
depends on, and is refused for a scope of runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.cli.conftest import UNDO, reversi_cli
from tests.engine.test_windows import MANIFEST as TRANSFERS

import reversi
from reversi.core.times import format_time

MANIFEST = TRANSFERS + """  bank.fee:
    requires: [bank.transfer]
    compensation: {tool: bank.refund_fee, args: {id: "$result.id"}}
"""


@pytest.fixture
def run_id(db_url: str, here: Path) -> str:
    (here / "tools.yaml").write_text(MANIFEST)
    now = datetime.now(UTC)
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        for name, left in (("soon", timedelta(hours=2)), ("later", timedelta(days=3)), ("gone", -timedelta(hours=1)),
                           ("last", timedelta(days=9))):
            run.begin("bank.transfer", {"to": name}).succeeded(
                {"id": name, "recallable_until": format_time(now + left)})
        return str(run.id)


def _cli(db_url: str, here: Path, *args: str) -> tuple[int, str, str]:
    done = reversi_cli("--db", db_url, *args, "-m", str(here / "tools.yaml"), cwd=here)
    return done.returncode, done.stdout, done.stderr


def test_the_plan_shows_each_window_and_a_deadline_first_rollback_takes_the_soonest_first(
    db_url: str, here: Path, run_id: str
) -> None:
    code, out, _ = _cli(db_url, here, "plan", run_id)
    assert code == 2
    assert "step 2  bank.transfer  unrecoverable  the undo window closed at " in out
    assert "step 0  bank.transfer  compensate -> bank.recall  (undo window closes " in out and ", in 1h" in out
    code, out, _ = _cli(db_url, here, "plan", run_id, "--deadline-first", "--json")
    assert [a["step"] for a in json.loads(out)["actions"]] == [0, 1, 3, 2]

    code, out, err = _cli(db_url, here, "rollback", run_id, "--deadline-first", "--compensator-cmd", UNDO, "--json")
    report = json.loads(out)
    assert code == 2, err
    assert report["compensated"] == [0, 1, 3]  # soonest first; the closed one is not called
    assert [u["step"] for u in report["unrecoverable"]] == [2]


def test_deadline_first_never_takes_a_step_before_one_that_depends_on_it(db_url: str, here: Path) -> None:
    (here / "tools.yaml").write_text(MANIFEST)
    now = datetime.now(UTC)

    def until(hours: int) -> dict[str, str]:
        return {"id": f"t{hours}", "recallable_until": format_time(now + timedelta(hours=hours))}

    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.begin("bank.transfer", {}).succeeded(until(1))
        run.begin("bank.transfer", {}).succeeded(until(2))
        run.begin("bank.note", {}, depends_on=[0]).succeeded({"id": "n"})  # no window; it depends on step 0
        run.begin("bank.transfer", {}).succeeded(until(5))
    (here / "tools.yaml").write_text(MANIFEST + "  bank.note:\n    compensation: {tool: bank.unnote}\n")
    code, out, err = _cli(db_url, here, "rollback", str(run.id), "--deadline-first", "--compensator-cmd", UNDO,
                          "--json")
    assert code == 0, err
    # step 1 (2 h) goes before step 3 (5 h); step 0 (1 h) waits for step 2, which depends on it
    assert json.loads(out)["compensated"] == [1, 3, 2, 0]


def test_deadline_first_is_for_one_run(db_url: str, here: Path, run_id: str) -> None:
    for command in ("plan", "rollback"):
        code, _, err = _cli(db_url, here, command, "--tool", "bank.transfer", "--deadline-first")
        assert code == 1 and err.strip() == ("reversi: error: --deadline-first and --reconcile are for one RUN: a "
                                             "scope of runs is undone newest first, as it stands"), err


def test_runs_expiring_lists_the_standing_steps_whose_windows_close_soon(db_url: str, here: Path,
                                                                         run_id: str) -> None:
    code, out, err = _cli(db_url, here, "runs", "--expiring", "24h", "--json")
    assert code == 0, err
    assert [(c["run_id"], c["step"]) for c in json.loads(out)] == [(run_id, 0)]  # 2 h left; 3 and 9 days do not
    code, out, _ = _cli(db_url, here, "runs", "--expiring", "4d")
    lines = out.splitlines()
    assert lines[0].split() == ["RUN", "STEP", "TOOL", "CLOSES", "LEFT"]
    assert [line.split()[1] for line in lines[1:]] == ["0", "1"]
    _cli(db_url, here, "rollback", run_id, "--compensator-cmd", UNDO)
    code, out, _ = _cli(db_url, here, "runs", "--expiring", "30d")
    assert out.strip() == "no standing step's undo window closes within 30d"  # all undone: none stands
    for bad, said in ((["--expiring", "soon"], "--expiring 'soon': expected a duration like 90d, 12h or 30m"),
                      (["--expiring", "1d", "--actor", "x"], "--expiring takes no other filter")):
        code, _, err = _cli(db_url, here, "runs", *bad)
        assert code == 1 and said in err and len(err.strip().splitlines()) == 1, err

"""`reversi prune` as an operator runs it: the window, the export, what it says, and a kill -9 midway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.conftest import reversi_cli

import reversi
from reversi.core.models import EventType, Mode, NewEvent, RunRecord, Scope, StepRecord
from reversi.store.retention import RUN_TABLES

WAIT_S = 30.0


def record(here: Path, outcome: str) -> str:
    """A run of one `stripe.create_charge`: `failed` (settled), `succeeded` (standing) or `uncertain`."""
    with reversi.open(manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run(actor="billing-agent", tenant="acme")
        step = run.begin("stripe.create_charge", {"amount": 700})
        {"failed": lambda: step.failed("card declined"), "succeeded": lambda: step.succeeded({"id": "ch_1"}),
         "uncertain": lambda: step.uncertain("timed out")}[outcome]()
        return str(run.id)


def test_prune_without_a_window_says_how_to_set_one(here: Path) -> None:
    record(here, "failed")
    done = reversi_cli("prune", cwd=here)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "reversi: error: no retention window: pass --older-than DURATION (e.g. 90d), or set `retention: 90d` in "
        "reversi.yaml or REVERSI_RETENTION=90d"]


@pytest.mark.parametrize(("args", "env", "config", "said"), [
    (["--older-than", "90 days"], {}, None, "--older-than '90 days': expected a duration like 90d, 12h or 30m"),
    ([], {"REVERSI_RETENTION": "soon"}, None, "REVERSI_RETENTION must be a duration like 90d or 12h, not 'soon'"),
    ([], {}, "retention: 90\n", "reversi.yaml: retention must be a duration like 90d or 12h, not 90"),
    ([], {}, "retention: 1y\n", "reversi.yaml: retention must be a duration like 90d or 12h, not '1y'"),
    (["--older-than", "0s", "--dry-run", "--export", "x.jsonl"], {}, None,
     "--dry-run writes no export: leave out --dry-run or --export"),
])
def test_a_bad_window_is_one_line_and_changes_nothing(here: Path, args: list[str], env: dict[str, str],
                                                       config: str | None, said: str) -> None:
    run_id = record(here, "failed")
    if config is not None:
        (here / "reversi.yaml").write_text(config)
    done = reversi_cli("prune", *args, cwd=here, env=env)
    assert (done.returncode, done.stderr.splitlines()) == (1, [f"reversi: error: {said}"])
    (here / "reversi.yaml").unlink(missing_ok=True)
    assert reversi_cli("show", run_id, cwd=here).returncode == 0
    assert not (here / "x.jsonl").exists()


def test_the_configured_retention_is_the_default_window(here: Path) -> None:
    run_id = record(here, "failed")
    (here / "reversi.yaml").write_text("retention: 1h\n")
    assert "pruned 0 runs" in reversi_cli("prune", cwd=here).stdout
    done = reversi_cli("prune", cwd=here, env={"REVERSI_RETENTION": "0s"})  # the environment wins over the file
    assert done.stdout.splitlines()[0].startswith(f"pruned {run_id} (opened ")
    assert reversi_cli("show", run_id, cwd=here).returncode == 1


def test_a_dry_run_lists_what_would_go_and_what_stays_and_changes_nothing(here: Path) -> None:
    settled, standing, unknown = record(here, "failed"), record(here, "succeeded"), record(here, "uncertain")
    before = reversi_cli("export", cwd=here).stdout
    done = reversi_cli("prune", "--older-than", "0s", "--dry-run", "-m", "tools.yaml", "--json", cwd=here)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [r["run_id"] for r in out["pruned"]] == [settled]
    assert {r["run_id"]: [h["text"] for h in r["kept_because"]] for r in out["kept"]} == {
        standing: ["step 0 still stands"], unknown: ["step 0: outcome unknown"]}
    assert out["dry_run"] is True
    assert reversi_cli("export", cwd=here).stdout == before


def test_export_then_prune_loses_no_event(here: Path) -> None:
    settled = [record(here, "failed") for _ in range(3)]
    standing = record(here, "succeeded")
    before = [json.loads(line) for line in reversi_cli("export", cwd=here).stdout.splitlines()]
    done = reversi_cli("prune", "--older-than", "0s", "--export", "archive.jsonl", "-m", "tools.yaml", cwd=here)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(line.split()[1] for line in lines if line.startswith("pruned run_")) == sorted(settled)
    assert [line.split(":")[0].split(" (")[0] for line in lines if line.startswith("kept ")] == [f"kept {standing}"]
    assert lines[-1] == "their events are in archive.jsonl"
    archived = [json.loads(line) for line in (here / "archive.jsonl").read_text().splitlines()]
    assert (here / "archive.jsonl").stat().st_mode & 0o777 == 0o600  # it holds what agents sent
    assert archived == [e for e in before if e["run_id"] in settled]  # every event, run by run, in seq order
    after = [json.loads(line) for line in reversi_cli("export", cwd=here).stdout.splitlines()]
    assert after == [e for e in before if e["run_id"] not in settled]


def test_an_export_file_is_never_overwritten(here: Path) -> None:
    run_id = record(here, "failed")
    (here / "archive.jsonl").write_text("an earlier archive\n")
    done = reversi_cli("prune", "--older-than", "0s", "--export", "archive.jsonl", cwd=here)
    assert (done.returncode, done.stderr.splitlines()) == (1, [
        "reversi: error: export file archive.jsonl exists already: give a new file (an export is never overwritten)"])
    assert (here / "archive.jsonl").read_text() == "an earlier archive\n"
    assert reversi_cli("show", run_id, cwd=here).returncode == 0


def seed_old(db: str, count: int, outcome: EventType = EventType.FAILED, tenant: str = "t") -> list[str]:
    """`count` runs opened in 2020, of one step whose last event is `outcome`: `failed`, they may go;
    `uncertain`, they are kept."""
    ids = [f"run_{outcome.value}{i:05d}" for i in range(count)]
    with reversi.open(db) as ledger, ledger.store.write() as q:
        for run_id in ids:
            q.insert_run(RunRecord(run_id, "local", Mode.OBSERVE, Scope("a", tenant), {},
                                   "2020-01-01T00:00:00.000000Z"))
            q.insert_step(StepRecord(run_id, 0, "stripe.create_charge", {"amount": 1}))
            q.append(run_id, [NewEvent(EventType.RUN_OPENED, None, "a"), NewEvent(EventType.INTENDED, 0, "a"),
                              NewEvent(outcome, 0, "a", {"error": "declined"})])
        q.execute("UPDATE events SET at = ?", ("2020-01-01T00:00:01.000000Z",))
    return ids


def rows_by_run(db: str, run_ids: list[str]) -> dict[str, list[str]]:
    """Each run's rows, in every table that holds rows of runs."""
    with reversi.open(db) as ledger, ledger.store.read() as q:
        return {run_id: sorted(repr(row) for table in RUN_TABLES
                               for row in q.execute(f"SELECT * FROM {table} WHERE run_id = ?", (run_id,)).fetchall())
                for run_id in run_ids}


def test_a_prune_killed_midway_leaves_whole_runs_and_a_second_prune_finishes(db_url: str, tmp_path: Path) -> None:
    ids = seed_old(db_url, 400)
    before = rows_by_run(db_url, ids)
    exe = Path(sys.executable).with_name("reversi")
    child = subprocess.Popen([str(exe), "--db", db_url, "prune", "--older-than", "1h"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ})
    assert child.stdout is not None
    seen = 0
    for line in child.stdout:  # the marker: five runs pruned, then kill -9 in the middle of the rest
        seen += line.startswith("pruned run_")
        if seen == 5:
            os.kill(child.pid, signal.SIGKILL)
            break
    assert child.wait(WAIT_S) == -signal.SIGKILL
    after = rows_by_run(db_url, ids)
    gone = [run_id for run_id in ids if not after[run_id]]
    assert 5 <= len(gone) < len(ids)  # the kill came midway
    assert all(after[run_id] == before[run_id] for run_id in ids if run_id not in gone)  # whole runs only

    done = subprocess.run([str(exe), "--db", db_url, "prune", "--older-than", "1h"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"pruned {len(ids) - len(gone)} runs opened before ")
    assert rows_by_run(db_url, ids) == {run_id: [] for run_id in ids}

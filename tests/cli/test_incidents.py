"""`reversi plan` and `rollback` of a scope of runs (`--key`, `--actor`, `--since`, `--tool`, `--contain`),
as a subprocess: everything a leaked key did, undone across its runs; other runs untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import UNDO, reversi_cli

import reversi

MANIFEST = """
version: 1
tools:
  notes.write:
    resources: ["note:${args.name}"]
    compensation: {tool: notes.restore, args: {name: "$args.name"}}
"""


@pytest.fixture
def notes(here: Path) -> Path:
    (here / "notes.yaml").write_text(MANIFEST)
    return here / "notes.yaml"


def _write(db_url: str, manifest: Path, principal: str, actor: str, *names: str) -> str:
    with reversi.open(db_url, manifests=[str(manifest)], principal=principal) as ledger:
        run = ledger.start_run(actor=actor)
        for name in names:
            run.begin("notes.write", {"name": name}).succeeded("ok")
        return run.id


def test_a_leaked_keys_runs_are_planned_and_rolled_back_together(here: Path, db_url: str, notes: Path) -> None:
    first = _write(db_url, notes, "leaky", "bot", "a", "b")
    second = _write(db_url, notes, "leaky", "bot", "a")
    kept = _write(db_url, notes, "good", "person", "c")

    plan = reversi_cli("--db", db_url, "plan", "-m", str(notes), "--key", "leaky", "--json", cwd=here)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["scope"] == {"key": "leaky"} and planned["runs"] == [second, first]
    assert [(a["run"], a["step"]) for a in planned["actions"]] == [(second, 0), (first, 1), (first, 0)]
    text = reversi_cli("--db", db_url, "plan", "-m", str(notes), "--key", "leaky", cwd=here).stdout
    assert text.splitlines()[0] == "scope: the runs of key=leaky" and text.rstrip().endswith("fully reversible")

    done = reversi_cli("--db", db_url, "rollback", "-m", str(notes), "--key", "leaky", "--compensator-cmd", UNDO,
                       "--json", cwd=here)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["complete"] and len(report["compensated"]) == 3
    with reversi.open(db_url) as ledger:
        assert ledger.get_run(kept).steps()[0].status.value == "succeeded"
        assert {s.status.value for r in (first, second) for s in ledger.get_run(r).steps()} == {"compensated"}

    again = reversi_cli("--db", db_url, "rollback", "-m", str(notes), "--key", "leaky", "--compensator-cmd", UNDO,
                        "--json", cwd=here)
    assert json.loads(again.stdout)["compensated"] == [] and len(json.loads(again.stdout)["already_undone"]) == 3


def test_a_later_run_of_another_actor_holds_the_scope_back(here: Path, db_url: str, notes: Path) -> None:
    mine = _write(db_url, notes, "p", "bot", "a")
    theirs = _write(db_url, notes, "p", "person", "a")
    plan = reversi_cli("--db", db_url, "plan", "-m", str(notes), "--actor", "bot", cwd=here)
    assert plan.returncode == 2, plan.stderr
    assert f"{mine}  step 0  notes.write  defer  blocked by {theirs} step 0 changed note:a after this step" \
        in plan.stdout


def test_contain_halts_the_actor_before_the_rollback(here: Path, db_url: str, notes: Path) -> None:
    _write(db_url, notes, "p", "bot", "a")
    done = reversi_cli("--db", db_url, "rollback", "-m", str(notes), "--actor", "bot", "--contain", "--reason",
                       "leak", "--compensator-cmd", UNDO, cwd=here)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith("contained: halt ")
    halts = json.loads(reversi_cli("--db", db_url, "halt", "list", "--json", cwd=here).stdout)
    assert [(h["reason"], h["scope"]["actor"]) for h in halts] == [("leak", "bot")]


@pytest.mark.parametrize(("args", "said"), [
    ([], "give a RUN, or a scope of runs"),
    (["run_x", "--key", "k"], "give a RUN or a scope of runs (--key), not both"),
    (["--key", "k", "--to", "x"], "--to and --after-step are for one RUN"),
    (["--label", "nolabel"], "--label 'nolabel': expected K=V"),
    (["--since", "yesterday"], "--since 'yesterday': expected a duration"),
    (["--actor", "bot\x1b[2J"], "actor must be printable text"),
    (["--since", "2d", "--until", "3d"], "is before since"),
])
def test_bad_scopes_are_one_line_errors(here: Path, db_url: str, notes: Path, args: list[str], said: str) -> None:
    for command in ("plan", "rollback"):
        done = reversi_cli("--db", db_url, command, "-m", str(notes), *args, cwd=here)
        assert done.returncode == 1 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done
        assert "Traceback" not in done.stderr


def test_contain_with_only_labels_is_refused_and_changes_nothing(here: Path, db_url: str, notes: Path) -> None:
    _write(db_url, notes, "p", "bot", "a")
    done = reversi_cli("--db", db_url, "rollback", "-m", str(notes), "--label", "team=x", "--contain",
                       "--compensator-cmd", UNDO, cwd=here)
    assert done.returncode == 1 and "labels and times match no halt" in done.stderr
    assert json.loads(reversi_cli("--db", db_url, "halt", "list", "--json", cwd=here).stdout) == []

"""`reversi checkpoint`, `plan`/`rollback --to NAME | --after-step N` and checkpoints in `show`, as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import UNDO, reversi_cli

import reversi


def _run(db_url: str, here: Path, charges: int) -> str:
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run(actor="bot")
        for i in range(charges):
            run.begin("stripe.create_charge", {"amount": i}).succeeded({"id": f"ch_{i}"})
        return run.id


def _charge(db_url: str, here: Path, run_id: str) -> None:
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        ledger.get_run(run_id).begin("stripe.create_charge", {"amount": 9}).succeeded({"id": "ch_9"})


def test_checkpoint_then_plan_and_roll_back_after_it(here: Path, db_url: str) -> None:
    run_id = _run(db_url, here, 2)
    made = reversi_cli("--db", db_url, "checkpoint", run_id, "before refactor", "--json", cwd=here)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["after_step"] == 1
    _charge(db_url, here, run_id)

    shown = reversi_cli("--db", db_url, "show", run_id, cwd=here)
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("-- checkpoint 'before refactor'"))
    assert lines[at - 1].startswith("step 1 ") and lines[at + 1].startswith("step 2 ")
    as_json = json.loads(reversi_cli("--db", db_url, "show", run_id, "--json", cwd=here).stdout)
    assert [c["name"] for c in as_json["checkpoints"]] == ["before refactor"]

    plan = reversi_cli("--db", db_url, "plan", run_id, "-m", "tools.yaml", "--to", "before refactor", "--json",
                       cwd=here)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert [a["step"] for a in planned["actions"]] == [2]
    assert planned["scope"] == {"after_step": 1, "checkpoint": "before refactor"}
    whole = json.loads(reversi_cli("--db", db_url, "plan", run_id, "-m", "tools.yaml", "--json", cwd=here).stdout)
    assert "scope" not in whole and len(whole["actions"]) == 3

    done = reversi_cli("--db", db_url, "rollback", run_id, "-m", "tools.yaml", "--to", "before refactor",
                       "--compensator-cmd", UNDO, "--json", cwd=here)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["compensated"] == [2] and report["scope"]["checkpoint"] == "before refactor"
    rest = reversi_cli("--db", db_url, "rollback", run_id, "-m", "tools.yaml", "--after-step", "-1",
                       "--compensator-cmd", UNDO, "--json", cwd=here)
    assert json.loads(rest.stdout)["compensated"] == [1, 0]
    assert json.loads(rest.stdout)["skipped"] == [2]


def test_bad_checkpoints_and_scopes_are_one_line_errors(here: Path, db_url: str) -> None:
    run_id = _run(db_url, here, 1)
    assert reversi_cli("--db", db_url, "checkpoint", run_id, "c", cwd=here).returncode == 0
    cases = [
        (("checkpoint", run_id, "c"), "already has a checkpoint named 'c'"),
        (("checkpoint", run_id, "a\x1b]52;c;aGk=\x07b"), "must be printable: it holds U+001B"),
        (("checkpoint", run_id, "x\u202ey"), "must be printable: it holds U+202E"),
        (("checkpoint", run_id, "x" * 10_000), "1-200 characters, not 10000"),
        (("plan", run_id, "--to", "c", "--after-step", "0"), "give --to or --after-step, not both"),
        (("rollback", run_id, "--to", "c", "--after-step", "0"), "give --to or --after-step, not both"),
        (("plan", run_id, "--to", "nope"), "no checkpoint named 'nope'"),
        (("plan", run_id, "--after-step", "5"), "no step 5 in"),
        (("plan", run_id, "--after-step", "x"), "'x' is not a valid integer"),
        (("rollback", run_id, "--to", "nope", "--compensator-cmd", UNDO), "no checkpoint named 'nope'"),
    ]
    for args, message in cases:
        p = reversi_cli("--db", db_url, *args, cwd=here)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        assert message in p.stderr and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert "\x1b" not in p.stderr and "\u202e" not in p.stderr
    with reversi.open(db_url) as ledger:
        assert [c.name for c in ledger.get_run(run_id).checkpoints()] == ["c"]
        assert all(e.type != "compensating" for e in ledger.get_run(run_id).events())


def test_a_checkpoint_is_the_runs_own_principals_to_take(here: Path, db_url: str) -> None:
    # The CLI is the local admin: it operates on every run, but records (a checkpoint is a record of the
    # run) only in its own principal's runs, as any principal's door allows.
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")], principal="billing-agent") as ledger:
        run_id = ledger.start_run(actor="bot").id
    refused = reversi_cli("--db", db_url, "checkpoint", run_id, "c", cwd=here)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"reversi: error: {run_id} belongs to another principal"
    assert json.loads(reversi_cli("--db", db_url, "show", run_id, "--json", cwd=here).stdout)["checkpoints"] == []
    taken = reversi_cli("--db", db_url, "checkpoint", run_id, "c", cwd=here, env={"REVERSI_PRINCIPAL": "billing-agent"})
    assert taken.returncode == 0, taken.stderr

"""What an operator tripped on at the command line: JSON errors, misplaced global flags, a missing
manifest on a read, commands in reversi.yaml taken from the file's folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.cli.conftest import record_charge, reversi_cli

import reversi


@pytest.mark.parametrize(("args", "code", "kind"), [
    (["show", "run_nope", "--json"], 1, "not_found"),
    (["show", "bad id", "--json"], 1, "bad_input"),
    (["runs", "--limit", "0", "--json"], 1, "bad_input"),
    (["--db", "mysql://x", "runs", "--json"], 1, "bad_input"),
    (["plan", "run_nope", "--json"], 1, "not_found"),
])
def test_with_json_an_error_is_a_json_object_on_stdout_with_the_same_exit_code(
    here: Path, args: list[str], code: int, kind: str
) -> None:
    done = reversi_cli(*args, cwd=here)
    said = json.loads(done.stdout)
    assert done.returncode == code
    assert said["error"]["code"] == kind
    assert done.stderr == f"reversi: error: {said['error']['message']}\n"


def test_without_json_an_error_is_one_line_on_stderr_only(here: Path) -> None:
    done = reversi_cli("show", "run_nope", cwd=here)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "reversi: error: no run run_nope\n"


def test_a_json_flag_after_double_dash_is_an_argument_not_a_request_for_json(here: Path) -> None:
    done = reversi_cli("halt", "add", "--", "--json", cwd=here)
    assert done.returncode == 0 and not done.stdout.lstrip().startswith("{\"error\"")


@pytest.mark.parametrize("flag", ["--db", "--config"])
def test_a_global_option_after_the_command_says_where_it_goes(here: Path, flag: str) -> None:
    done = reversi_cli("show", "run_x", flag, "somewhere", cwd=here)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"reversi: error: {flag} is a global option: put it before the command "
                           f"(reversi {flag} VALUE show ...)\n")


def test_reading_commands_go_on_without_a_missing_manifest_and_say_so(here: Path) -> None:
    run_id = record_charge(here)
    (here / "reversi.yaml").write_text("manifests: [tools.yaml, gone.yaml]\n")
    warning = "reversi: warning: manifest gone.yaml not found: shown without it\n"
    for args in (["runs"], ["show", run_id], ["export", "--run", run_id]):
        done = reversi_cli(*args, cwd=here)
        assert done.returncode == 0 and run_id in done.stdout, done
        assert done.stderr == warning
    acting = reversi_cli("plan", run_id, cwd=here)  # what acts on the world needs every manifest
    assert acting.returncode == 1 and "gone.yaml: cannot read" in acting.stderr


def test_commands_in_the_config_file_take_relative_paths_from_its_folder(here: Path) -> None:
    """`compensator_cmd: python3 ./undo.py` in ops/reversi.yaml runs ops/undo.py, from any folder."""
    ops = here / "ops"
    ops.mkdir()
    (ops / "undo.py").write_text("import json, pathlib, sys\njson.load(sys.stdin)\n"
                                 "pathlib.Path(__file__).with_name('ran').touch()\nprint('{}')\n")
    (ops / "reversi.yaml").write_text(f"db: sqlite:///../journal.db\nmanifests: [../tools.yaml]\n"
                                      f"compensator_cmd: {sys.executable} ./undo.py\n")
    with reversi.open(f"sqlite:///{here / 'journal.db'}", manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.begin("stripe.create_charge", {"amount": 5}).succeeded({"id": "ch_1"})
    elsewhere = here / "elsewhere"
    elsewhere.mkdir()
    done = reversi_cli("--config", str(ops / "reversi.yaml"), "rollback", str(run.id), "--json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["complete"] is True
    assert report["compensated"] == [0] and (ops / "ran").exists()


def test_plan_after_a_failed_undo_says_so_and_offers_it_again(here: Path) -> None:
    run_id = record_charge(here)
    failing = f"{sys.executable} -c \"import sys; sys.exit('stripe: 503 service unavailable')\""
    failed = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", failing, cwd=here)
    assert failed.returncode == 2
    shown = reversi_cli("plan", run_id, "-m", "tools.yaml", cwd=here)
    assert shown.stdout.splitlines()[0] == ("step 0  stripe.create_charge  compensate -> stripe.refund  (its last undo "
                                            "failed: stripe: 503 service unavailable, after 1 attempt; tried again)")
    planned = json.loads(reversi_cli("plan", run_id, "-m", "tools.yaml", "--json", cwd=here).stdout)
    assert planned["actions"][0]["last_failure"] == "stripe: 503 service unavailable, after 1 attempt"


def test_resolving_as_succeeded_without_what_the_undo_needs_asks_for_force(here: Path) -> None:
    run_id = record_charge(here, uncertain=True)
    refused = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--note", "saw it", "-m", "tools.yaml",
                          cwd=here)
    assert refused.returncode == 1 and refused.stderr == (
        "reversi: error: step 0's undo needs $result.id from its result, which --result does not give: without it "
        "the step can never be undone. Give it in --result, or add --force to settle it anyway\n")
    assert json.loads(reversi_cli("show", run_id, "--json", cwd=here).stdout)["steps"][0]["status"] == "uncertain"
    given = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--result", '{"id": "ch_9"}', "--note",
                        "in the dashboard", "-m", "tools.yaml", cwd=here)
    assert given.returncode == 0, given.stderr


def test_a_mistaken_resolve_is_corrected_until_an_undo_is_tried(here: Path) -> None:
    run_id = record_charge(here, uncertain=True)
    forced = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--note", "saw it", "--force",
                         "-m", "tools.yaml", cwd=here)
    assert forced.returncode == 0, forced.stderr
    plan = json.loads(reversi_cli("plan", run_id, "-m", "tools.yaml", "--json", cwd=here).stdout)
    assert plan["actions"][0]["kind"] == "unrecoverable"
    fixed = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--result", '{"id": "ch_9"}',
                        "--note", "found the id after all", "-m", "tools.yaml", cwd=here)
    assert fixed.returncode == 0, fixed.stderr
    plan = json.loads(reversi_cli("plan", run_id, "-m", "tools.yaml", "--json", cwd=here).stdout)
    assert plan["actions"][0]["args"] == {"charge_id": "ch_9"}
    with reversi.open() as ledger:
        resolved = [e for e in ledger.get_run(run_id).events() if e.type == "resolved"]
    assert [e.data.get("correction", False) for e in resolved] == [False, True]
    assert resolved[1].data["note"] == "found the id after all"

    undo = f"{sys.executable} -c \"import sys; sys.exit('stripe: 503')\""
    assert reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", undo, cwd=here).returncode == 2
    late = reversi_cli("resolve", run_id, "0", "--status", "failed", "--note", "never mind", cwd=here)
    assert late.returncode == 1 and "is compensation_failed: only intended or uncertain steps" in late.stderr

"""The `reversi` command as a user runs it: in a subprocess, reading its output and exit code."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from tests.cli.conftest import COMPENSATOR, record_charge, reversi_cli

import reversi
import reversi.manifests
from reversi.cli.main import cli


def test_every_command_has_help_text() -> None:
    ctx = click.Context(cli)
    missing = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        commands = [command, *getattr(command, "commands", {}).values()]
        missing += [c.name for c in commands if not (c.help or "").strip()]
    assert missing == []


def test_help_does_not_import_the_engine_or_its_drivers() -> None:
    code = ("import sys\nfrom reversi.cli.main import cli\n"
            "try:\n    cli.main(['--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('psycopg', 'pydantic', 'yaml', 'rich', 'reversi.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("args", [
    ["plan"],                                        # missing argument: click would say exit 2
    ["nosuch"],
    ["rollback", "run_x", "--retries", "lots"],
    ["resolve", "run_x", "0", "--status", "maybe", "--note", "n"],
    ["--db", "mysql://somewhere", "runs"],
    ["show", "run_nope"],
    ["export", "--run", "run_nope"],
    ["runs", "--since", "last tuesday"],
    ["approvals", "approve", "apr_nope"],
    ["halt", "lift", "halt_nope"],
    ["halt", "add", "bad \udcff byte"],               # not UTF-8: arrives as a lone surrogate
    ["--db", "sqlite:///elsewhere.db", "demo"],      # the demo keeps its own journal
    ["kill-switch", "on", "x"],                      # no kill file configured
    ["manifest", "check", "missing.yaml"],
    ["manifest", "show", "nosuch"],
    ["manifest", "show", "memory", "--path", "--prefix", "mem"],
    ["manifest", "show", "memory", "--prefix", "a b"],
    ["--db", "postgresql://u:s3cret@[::1", "runs"],  # libpq cannot read it (and the password is not shown)
    ["--db", "", "runs"],
    ["--config", "", "runs"],
    ["resolve", "run_x", "99999999999999999999", "--status", "failed", "--note", "n"],
    ["approvals", "list", "--run", "bad"],
    ["approvals", "list", "--run", ""],
    ["halt", "add", "r", "--tool", ""],
    ["rollback", "run_x", "--compensator-cmd", ""],
    ["rollback", "run_x", "--retry-base-ms", "-1"],
    ["--db", "postgresql://postgres@127.0.0.1:1/nothing", "runs"],  # psycopg's error is two lines
    ["prune"],                                       # no window configured
    ["prune", "--older-than", "ninety days"],
    ["prune", "--older-than", "0s", "--export", ""],
    ["prune", "--older-than", "0s", "--export", "no-such-dir/archive.jsonl"],
])
def test_user_errors_exit_1_with_one_line_and_no_traceback(here: Path, args: list[str]) -> None:
    p = reversi_cli(*args, cwd=here)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(p.stderr.splitlines()) <= 1, p.stderr
    assert p.stderr.startswith("reversi: error: ") or "missing.yaml" in p.stdout


def test_a_config_file_that_is_not_yaml_is_one_line_naming_where(here: Path) -> None:
    (here / "reversi.yaml").write_text("db: [\n  x: y\n")
    p = reversi_cli("runs", cwd=here)
    assert p.returncode == 1
    assert p.stderr == ("reversi: error: cannot read the config file reversi.yaml: line 3, column 1: "
                        "expected ',' or ']', but got '<stream end>'\n")


def test_the_shipped_manifests_are_shown_checked_and_prefixed_for_a_gateway_with_several_upstreams(
    here: Path,
) -> None:
    names = reversi.manifests.names()
    assert {"memory", "filesystem", "git"} <= set(names)
    paths = [reversi_cli("manifest", "show", "--path", name, cwd=here).stdout.strip() for name in names]
    assert paths == [str(reversi.manifests.path(name)) for name in names]
    for path in paths:  # each for its own server: several together name the same tools (list_*)
        checked = reversi_cli("manifest", "check", path, cwd=here)
        assert checked.returncode == 0 and "warning" not in checked.stdout, checked.stdout
    shown = reversi_cli("manifest", "show", "memory", cwd=here)
    assert shown.stdout == Path(paths[names.index("memory")]).read_text() and "Checked against" in shown.stdout
    (here / "mem.yaml").write_text(reversi_cli("manifest", "show", "memory", "--prefix", "mem", cwd=here).stdout)
    with reversi.open(manifests=[str(here / "mem.yaml")]) as ledger:
        entry = ledger.manifests.lookup("mem.delete_entities")
    assert entry is not None and entry.capture is not None and len(entry.compensations) == 1
    assert (entry.capture.tool, entry.compensations[0].tool) == ("mem.open_nodes", "mem.create_entities")


def test_an_invalid_manifests_problems_are_one_line(here: Path) -> None:
    (here / "bad.yaml").write_text("version: 1\ntools:\n  a.b: {effect: sometimes}\n  c.d: {colour: red}\n")
    p = reversi_cli("plan", "run_x", "-m", "bad.yaml", cwd=here)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith("reversi: error: invalid manifest: bad.yaml:3: ") and "; bad.yaml:4: " in p.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["show", "run_x!"], "malformed run id 'run_x!': expected run_ followed by 1-64 of A-Z a-z 0-9 _ -"),
    (["approvals", "approve", "apr_nope"], "malformed approval id 'apr_nope': expected apr_ followed by 32 hex digits"),
    (["approvals", "deny", "apr_!", "--note", "n"], "malformed approval id 'apr_!': expected apr_ followed by 32 hex"
                                                    " digits"),
    (["halt", "lift", "halt_nope"], "malformed halt id 'halt_nope': expected halt_ followed by a UUID"),
    (["keys", "revoke", "k!"], "malformed key id 'k!': expected 12 of a-z 0-9"),
])
def test_a_malformed_id_is_called_malformed_not_missing(here: Path, args: list[str], message: str) -> None:
    p = reversi_cli(*args, cwd=here)
    assert p.returncode == 1 and p.stderr == f"reversi: error: {message}\n"


def test_a_well_formed_id_that_names_nothing_is_missing(here: Path) -> None:
    assert reversi_cli("approvals", "approve", "apr_" + "0" * 32, cwd=here).stderr.startswith(
        "reversi: error: no approval apr_000")
    missing_halt = "halt_00000000-0000-0000-0000-000000000000"
    lifted = reversi_cli("halt", "lift", missing_halt, cwd=here)
    assert lifted.stderr == f"reversi: error: no active halt {missing_halt}\n"
    assert reversi_cli("keys", "revoke", "abcdefghijkl", cwd=here).stderr == "reversi: error: no key abcdefghijkl\n"


@pytest.mark.parametrize("where", ["a-directory", "/proc/reversi.db"])
def test_a_store_file_that_cannot_be_opened_fails_at_once_in_one_line(here: Path, where: str) -> None:
    (here / "a-directory").mkdir()
    started = time.monotonic()
    p = reversi_cli("--db", f"sqlite:///{where}", "runs", cwd=here)
    assert time.monotonic() - started < 5, "it waited as if another process held the file"
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1
    assert p.stderr.startswith(f"reversi: error: cannot open the store at {where}: ")


def test_bare_reversi_prints_its_help_and_exits_1(here: Path) -> None:
    p = reversi_cli(cwd=here)
    assert p.returncode == 1 and p.stderr.startswith("Usage: reversi [OPTIONS] COMMAND") and "error" not in p.stderr


def test_a_password_in_a_bad_store_url_is_not_printed(here: Path) -> None:
    p = reversi_cli("--db", "postgresql://u:s3cret@[::1", "runs", cwd=here)
    assert "s3cret" not in p.stderr and "not a valid PostgreSQL URL" in p.stderr


def test_a_kill_switch_reason_that_is_not_unicode_leaves_the_switch_as_it_was(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"REVERSI_KILL_FILE": str(here / "KILL")}
    assert reversi_cli("kill-switch", "on", "bad deploy", cwd=here, env=env).returncode == 0
    p = reversi_cli("kill-switch", "on", "bad \udcff byte", cwd=here, env=env)
    assert p.returncode == 1 and p.stderr.strip() == "reversi: error: the reason is not valid Unicode text"
    assert (here / "KILL").read_text() == "bad deploy\n"
    (here / "KILL").write_bytes(b"bad \xff reason\n")  # written by some other tool
    status = json.loads(reversi_cli("kill-switch", "status", "--json", cwd=here, env=env).stdout)
    assert status["reason"] == "bad \ufffd reason"
    monkeypatch.setenv("REVERSI_KILL_FILE", str(here / "KILL"))
    with reversi.open(manifests=[str(here / "tools.yaml")]) as ledger, \
            pytest.raises(reversi.errors.Halted, match="bad \ufffd reason"):
        ledger.start_run().call("stripe.create_charge", {}, lambda: {"id": "ch"})


@pytest.mark.parametrize(("config", "message"), [
    (b"\xff\xfe db: x", "it is not UTF-8 text"),
    (b"compensator_cmd: 5\n", "compensator_cmd must be a string, not 5"),
    (b"reader_cmd: {a: 1}\n", "reader_cmd must be a string, not {'a': 1}"),
    (b"kill_switch_file: [1]\n", "kill_switch_file must be a string, not [1]"),
    (b"upstreams: [a]\n", "upstreams must be a mapping"),
])
def test_a_config_file_with_values_of_the_wrong_kind_is_named(here: Path, config: bytes, message: str) -> None:
    (here / "reversi.yaml").write_bytes(config)
    p = reversi_cli("runs", cwd=here)
    assert p.returncode == 1 and "Traceback" not in p.stderr and message in p.stderr, p.stderr


@pytest.mark.parametrize(("config", "message"), [
    ("mode: chaos\n", "mode must be observe or enforce, not 'chaos'"),
    ("db: mysql://somewhere\n", "db must be a store URL (sqlite:///PATH or postgresql://...), not 'mysql://somewhere'"),
    ("manifests: 5\n", "manifests must be a path or a list of paths, not 5"),
    ("manifests: [tools.yaml, '']\n", "manifests holds an empty path"),
    ("kill_switch_file: ''\n", "kill_switch_file is empty: give a value, or leave the key out"),
    ("compensator_cmd: 'undo \"'\n", "compensator_cmd 'undo \"' cannot be parsed as a command: No closing quotation"),
    ("reader_cmd: ' '\n", "reader_cmd is empty: give a value, or leave the key out"),
    ("upstreams: {shop: 5}\n", "upstreams shop: expected a command, a URL, a list of words or a mapping, not 5"),
])
def test_a_config_value_its_key_does_not_take_is_named_with_the_file_when_it_is_loaded(
    here: Path, config: str, message: str
) -> None:
    (here / "reversi.yaml").write_text(config)
    p = reversi_cli("runs", cwd=here)
    assert p.returncode == 1 and p.stderr == f"reversi: error: reversi.yaml: {message}\n"
    with pytest.raises(reversi.errors.ConfigError) as refused:
        reversi.open()
    assert refused.value.message == f"reversi.yaml: {message}"


def test_a_mode_in_the_environment_that_is_not_a_mode_is_named(here: Path) -> None:
    p = reversi_cli("runs", cwd=here, env={"REVERSI_MODE": "chaos"})
    assert p.returncode == 1
    assert p.stderr == "reversi: error: REVERSI_MODE must be observe or enforce, not 'chaos'\n"


def test_a_config_files_db_path_is_taken_from_its_folder(here: Path) -> None:
    (here / "cfg").mkdir()
    (here / "cfg" / "reversi.yaml").write_text("db: sqlite:///store.db\n")
    (here / "elsewhere").mkdir()
    assert reversi_cli("--config", "../cfg/reversi.yaml", "runs", cwd=here / "elsewhere").returncode == 0
    assert (here / "cfg" / "store.db").exists() and not (here / "elsewhere" / "store.db").exists()


def test_resolve_refuses_a_result_for_a_failed_step(here: Path) -> None:
    run_id = record_charge(here, uncertain=True)
    p = reversi_cli("resolve", run_id, "0", "--status", "failed", "--result", '{"id": "zz"}', "--note", "no",
                    cwd=here)
    assert p.returncode == 1 and "a failed step has no result" in p.stderr
    assert json.loads(reversi_cli("show", run_id, "--json", cwd=here).stdout)["steps"][0]["status"] == "uncertain"


def test_the_demo_in_a_folder_it_cannot_write_is_a_one_line_error(here: Path) -> None:
    (here / ".reversi").write_text("a file, not a folder")
    p = reversi_cli("demo", cwd=here)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"reversi: error: the demo cannot set up its files in {here}")


def test_a_refused_resolve_changes_nothing(here: Path) -> None:
    run_id = record_charge(here, uncertain=True)
    p = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--result", "{not json", "--note", "x",
                    cwd=here)
    assert p.returncode == 1 and "--result is not JSON" in p.stderr
    shown = json.loads(reversi_cli("show", run_id, "--json", cwd=here).stdout)
    assert shown["steps"][0]["status"] == "uncertain"


@pytest.mark.parametrize("levels", [201, 20_000])
def test_a_result_nested_too_deep_is_a_one_line_error_that_changes_nothing(here: Path, levels: int) -> None:
    run_id = record_charge(here, uncertain=True)
    p = reversi_cli("resolve", run_id, "0", "--status", "succeeded", "--result", "[" * levels + "]" * levels,
                    "--note", "x", cwd=here)
    assert p.returncode == 1
    assert p.stderr == "reversi: error: --result: JSON nested deeper than 200 levels\n"
    shown = json.loads(reversi_cli("show", run_id, "--json", cwd=here).stdout)
    assert shown["steps"][0]["status"] == "uncertain"


def test_a_plan_with_no_manifests_in_force_says_how_to_give_one(here: Path) -> None:
    run_id = record_charge(here)
    hint = "no manifests in force: pass -m FILE, set manifests: in reversi.yaml or REVERSI_MANIFEST"
    p = reversi_cli("plan", run_id, cwd=here)
    assert p.returncode == 2
    assert p.stdout.splitlines() == ["step 0  stripe.create_charge  unmanifested  no manifest entry", f"note: {hint}",
                                     "NOT fully reversible: see above"]
    assert json.loads(reversi_cli("plan", run_id, "--json", cwd=here).stdout)["notes"] == [hint]
    assert json.loads(reversi_cli("plan", run_id, "-m", "tools.yaml", "--json", cwd=here).stdout)["notes"] == []


def test_the_completion_script_it_prints_completes_commands_in_bash(here: Path) -> None:
    script = reversi_cli("completion", "bash", cwd=here)
    assert script.returncode == 0 and "_REVERSI_COMPLETE=bash_complete" in script.stdout
    bin_dir = Path(sys.executable).parent
    # Source the script, then ask its completion function what `reversi ro<TAB>` offers.
    asked = ('eval "$(reversi completion bash)"; COMP_WORDS=(reversi ro); COMP_CWORD=1; '
             '_reversi_completion reversi; printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "-c", asked], capture_output=True, text=True, cwd=here, timeout=60,
                       env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert p.stdout.split() == ["rollback"], p.stderr


def test_completion_for_a_shell_it_does_not_know_is_a_one_line_error(here: Path) -> None:
    p = reversi_cli("completion", "tcsh", cwd=here)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1 and "'tcsh' is not one of" in p.stderr


def test_runs_show_and_filters(here: Path) -> None:
    settled = record_charge(here)
    unknown = record_charge(here, uncertain=True)
    listing = json.loads(reversi_cli("runs", "--json", cwd=here).stdout)
    assert [r["run_id"] for r in listing] == [unknown, settled]
    assert listing[0] | {"created_at": None} == {
        "run_id": unknown, "principal": "local", "mode": "observe", "actor": "billing-agent", "tenant": "acme",
        "environment": "", "created_at": None, "steps": 1, "standing": 0, "unresolved": 1}
    only_uncertain = json.loads(reversi_cli("runs", "--status", "uncertain", "--json", cwd=here).stdout)
    assert [r["run_id"] for r in only_uncertain] == [unknown]
    assert json.loads(reversi_cli("runs", "--tenant", "other", "--json", cwd=here).stdout) == []
    text = reversi_cli("runs", cwd=here).stdout
    assert settled in text and unknown in text
    shown = reversi_cli("show", settled, cwd=here).stdout
    assert "step 0  stripe.create_charge  succeeded" in shown


def test_show_gives_the_runs_labels_and_counts_one_step_as_one(here: Path) -> None:
    with reversi.open() as ledger:
        run = ledger.start_run(labels={"ticket": "INC-42", "team": "billing"})
        run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    shown = json.loads(reversi_cli("show", run.id, "--json", cwd=here).stdout)
    assert shown["labels"] == {"ticket": "INC-42", "team": "billing"} and shown["steps_count"] == 1
    text = reversi_cli("show", run.id, cwd=here).stdout.splitlines()
    assert text[1].endswith("; 1 step, 1 standing, 0 unresolved")
    assert text[2] == "labels: team=billing, ticket=INC-42"


def test_the_config_file_supplies_the_store_and_manifests(here: Path) -> None:
    (here / "reversi.yaml").write_text("db: sqlite:///elsewhere/ledger.db\nmanifests: [tools.yaml]\n")
    with reversi.open() as ledger:  # reads reversi.yaml too
        run = ledger.start_run()
        run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_9"})
    assert (here / "elsewhere" / "ledger.db").exists()
    p = reversi_cli("plan", run.id, "--json", cwd=here)
    assert p.returncode == 0 and json.loads(p.stdout)["actions"][0]["compensation_tool"] == "stripe.refund"


def test_an_unknown_config_key_is_named(here: Path) -> None:
    (here / "reversi.yaml").write_text("database: x\n")
    p = reversi_cli("runs", cwd=here)
    assert p.returncode == 1 and "unknown key 'database'" in p.stderr


def test_the_kill_switch_turns_on_reports_and_turns_off(here: Path) -> None:
    env = {"REVERSI_KILL_FILE": str(here / "KILL")}
    assert reversi_cli("kill-switch", "on", "incident 42", cwd=here, env=env).returncode == 0
    status = json.loads(reversi_cli("kill-switch", "status", "--json", cwd=here, env=env).stdout)
    assert status == {"state": "on", "reason": "incident 42", "file": str(here / "KILL")}
    assert reversi_cli("kill-switch", "off", cwd=here, env=env).stdout.strip() == "kill switch off"
    assert "kill switch off" in reversi_cli("kill-switch", "status", cwd=here, env=env).stdout


def test_a_kill_file_that_cannot_be_used_is_a_one_line_error(here: Path) -> None:
    (here / "a-directory").mkdir()
    env = {"REVERSI_KILL_FILE": str(here / "a-directory")}
    for args in (["on", "x"], ["off"], ["status"]):
        p = reversi_cli("kill-switch", *args, cwd=here, env=env)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.startswith(f"reversi: error: kill file {here / 'a-directory'}: "), p.stderr


def test_a_kill_file_in_a_directory_that_does_not_exist_is_refused_and_nothing_is_made(here: Path) -> None:
    kill_file = here / "typo" / "deeper" / "KILL"
    p = reversi_cli("kill-switch", "on", "x", cwd=here, env={"REVERSI_KILL_FILE": str(kill_file)})
    assert p.returncode == 1
    assert p.stderr == f"reversi: error: kill file {kill_file}: the directory {kill_file.parent} does not exist\n"
    assert not (here / "typo").exists()


def test_halts_list_as_json_and_lift_one_by_id(here: Path) -> None:
    added = json.loads(reversi_cli("halt", "add", "freeze", "--tenant", "acme", "--by", "dana", "--json",
                                   cwd=here).stdout)
    listing = json.loads(reversi_cli("halt", "list", "--json", cwd=here).stdout)
    assert listing == [added]
    assert set(added) == {"halt_id", "reason", "scope", "by", "created_at"}
    assert added["scope"] == {"tenant": "acme"} and added["by"] == "dana"
    assert reversi_cli("halt", "lift", added["halt_id"], cwd=here).stdout.strip() == "lifted 1"
    assert json.loads(reversi_cli("halt", "list", "--json", cwd=here).stdout) == []


def test_who_halts_and_lifts_is_by_else_reversi_actor(here: Path) -> None:
    acting = {"REVERSI_ACTOR": "ops-on-call"}
    added = json.loads(reversi_cli("halt", "add", "freeze", "--json", cwd=here, env=acting).stdout)
    assert added["by"] == "ops-on-call"
    assert reversi_cli("halt", "lift", "--by", "erin", cwd=here, env=acting).stdout.strip() == "lifted 1"
    lifted = [json.loads(line) for line in reversi_cli("export", cwd=here).stdout.splitlines()][-1]
    assert (lifted["type"], lifted["actor"]) == ("halt_lifted", "erin")


def test_a_denial_needs_a_note(here: Path) -> None:
    p = reversi_cli("approvals", "deny", "apr_x", cwd=here)
    assert p.returncode == 1 and "note" in p.stderr


def test_rollback_without_a_compensator_says_how_to_give_one(here: Path) -> None:
    run_id = record_charge(here)
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", cwd=here)
    assert p.returncode == 1 and "--compensator-cmd" in p.stderr


def test_the_compensator_can_come_from_the_environment(here: Path) -> None:
    run_id = record_charge(here)
    env = {"REVERSI_COMPENSATOR_CMD": f"{sys.executable} -c \"{COMPENSATOR}\"", "REVERSI_MANIFEST": "tools.yaml"}
    p = reversi_cli("rollback", run_id, "--json", cwd=here, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["compensated"] == [0]


def test_a_compensator_that_cannot_start_fails_the_step_with_the_reason(here: Path) -> None:
    run_id = record_charge(here)
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", "/nonexistent/undo", "--json",
                    cwd=here)
    assert p.returncode == 2
    [failure] = json.loads(p.stdout)["failed"]
    assert "cannot run /nonexistent/undo" in failure["error"]


def test_a_compensator_that_hangs_is_stopped_by_the_timeout(here: Path) -> None:
    run_id = record_charge(here)
    p = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--compensator-cmd", "sleep 30", "--cmd-timeout", "0.2",
                    "--json", cwd=here)
    assert p.returncode == 2
    assert "timed out after 0.2 s" in json.loads(p.stdout)["failed"][0]["error"]


def test_rollback_shows_progress_on_a_terminal_and_still_prints_the_report(here: Path) -> None:
    run_id = record_charge(here)
    exe = Path(sys.executable).with_name("reversi")
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(exe), "rollback", run_id, "-m", "tools.yaml", "--compensator-cmd",
                             f"{sys.executable} -c \"{COMPENSATOR}\""], stdout=terminal, stderr=terminal, cwd=here)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=60) == 0
    output = b"".join(chunks).decode(errors="replace")
    assert "rollback complete" in output and "compensated -> stripe.refund" in output


def test_manifest_check_warns_about_a_write_tool_without_an_undo(here: Path) -> None:
    (here / "loose.yaml").write_text("version: 1\ntools:\n  crm.delete_contact: {}\n")
    p = reversi_cli("manifest", "check", "loose.yaml", cwd=here)
    assert p.returncode == 0
    assert "loose.yaml:3: warning:" in p.stdout and "no compensation declared" in p.stdout


def test_export_since_a_moment_keeps_later_events_only(here: Path) -> None:
    run_id = record_charge(here)
    assert reversi_cli("export", "--since", "2999-01-01", cwd=here).stdout == ""
    events = [json.loads(line) for line in reversi_cli("export", "--since", "1h", cwd=here).stdout.splitlines()]
    assert {e["run_id"] for e in events} == {run_id}
    assert [e["type"] for e in events] == ["run_opened", "intended", "succeeded"]


def test_export_of_everything_ends_with_the_halts_journal(here: Path) -> None:
    run_id = record_charge(here)
    added = json.loads(reversi_cli("halt", "add", "freeze", "--json", cwd=here).stdout)
    reversi_cli("halt", "lift", cwd=here)
    events = [json.loads(line) for line in reversi_cli("export", cwd=here).stdout.splitlines()]
    assert [e["run_id"] for e in events[:3]] == [run_id] * 3
    assert [(e["run_id"], e["type"], e["data"]["halt_id"]) for e in events[3:]] == [
        (None, "halt_added", added["halt_id"]), (None, "halt_lifted", added["halt_id"])]


def test_the_configured_mode_applies_to_new_runs(here: Path) -> None:
    (here / "reversi.yaml").write_text("mode: enforce\n")
    with reversi.open() as ledger:
        assert ledger.start_run().mode == "enforce"
        assert ledger.start_run(mode="observe").mode == "observe"


def test_an_approval_used_by_its_call_cannot_be_decided_again(here: Path) -> None:
    (here / "tools.yaml").write_text("version: 1\ntools:\n  payments.wire:\n    requires_approval: true\n"
                                     "    irreversible: true\n")
    with reversi.open(manifests=["tools.yaml"]) as ledger:
        run = ledger.start_run()
        with pytest.raises(reversi.errors.ApprovalRequired) as waiting:
            run.call("payments.wire", {"amount": 5}, lambda amount: {"id": "w_1"})
        approval_id = waiting.value.approval_id
        ledger.approve(approval_id, by="dana")
        assert ledger.approve(approval_id, by="dana").decided_by == "dana", "approving twice changes nothing"
        run.call("payments.wire", {"amount": 5}, lambda amount: {"id": "w_1"})
    for args in (["approve", approval_id], ["deny", approval_id, "--note", "too late"]):
        p = reversi_cli("approvals", *args, cwd=here)
        assert p.returncode == 1
        assert "already used" in p.stderr


def test_a_file_name_that_is_not_utf8_is_printed_as_given_where_the_locale_makes_stdout_strict(here: Path) -> None:
    exe = Path(sys.executable).with_name("reversi")
    name = b"\xff\x80.yaml"
    done = subprocess.run([bytes(exe), b"manifest", b"check", name], capture_output=True, cwd=here, timeout=60,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    assert done.returncode == 1 and done.stderr == b"", done.stderr
    assert done.stdout == name + b": cannot read: No such file or directory\n"


@pytest.mark.parametrize(("args", "said"), [
    (["--config", "x" * 5000, "runs"], "reversi: error: cannot read the config file x"),
    (["--db", "sqlite:///" + "x" * 5000, "runs"], "reversi: error: cannot open the store at x"),
])
def test_a_path_too_long_for_the_file_system_is_one_error_line(here: Path, args: list[str], said: str) -> None:
    p = reversi_cli(*args, cwd=here)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr[-500:]
    assert p.stderr.startswith(said) and p.stderr.endswith(": File name too long\n")

"""`reversi manifest check --upstream`, `draft`, `drill` and `coverage` through the real CLI, against the
npm reference servers (server-memory, server-filesystem) started as the user would start them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from tests.cli.conftest import reversi_cli
from tests.gateway.npm import everything_over_http, needs_node, server

import reversi.manifests

pytestmark = needs_node

MEMORY = shlex.join(server("memory"))
SCRATCH_MEMORY = ["--env", "MEMORY_FILE_PATH={scratch}/memory.jsonl"]
READS = "read_graph: {effect: read}\n  search_nodes: {effect: read}\n  open_nodes: {effect: read}\n"

# One mistake of each kind the live check finds, on the line the message names.
MISTAKES = f"""\
version: 1
tools:
  create_entities:
    compensation:
      tool: delete_entities
      args:
        entityNames: "$args.entitys[*].name"
        cascade: true
    verification:
      tool: open_node
      args: {{names: "$result.entities[*].name"}}
  create_relations:
    compensation:
      tool: delete_relations
      args: {{relation: "$result.relations"}}
  add_observations:
    compensation:
      tool: remove_observations
      args: {{deletions: "$result.results[*].observations"}}
  delete_entities: {{irreversible: true}}
  delete_observations: {{irreversible: true}}
  {READS}"""
MISTAKES_FOUND = [
    "{m}:2: delete_relations may write (the server does not mark it read-only) and has no entry",
    '{m}:7: $args.entitys[*].name: not in the input schema of create_entities (no key "entitys" declared)',
    '{m}:8: warning: compensation.args.cascade: delete_entities has no argument "cascade" declared: it may be ignored',
    "{m}:10: verification tool open_node: the server offers no such tool",
    '{m}:15: compensation.args: delete_relations requires "relations", which is not given',
    '{m}:15: warning: compensation.args.relation: delete_relations has no argument "relation" declared: it may be '
    "ignored",
    "{m}:18: compensation tool remove_observations: the server offers no such tool",
    '{m}:19: $result.results[*].observations cannot resolve under the output schema of add_observations (no key '
    '"observations" in results[*])',
]

# Undos the memory server really has; `add_observations` is given a wrong one on purpose (its items
# are {entityName, addedObservations}; delete_observations wants {entityName, observations}).
MEMORY_MANIFEST = f"""\
version: 1
tools:
  create_entities:
    compensation:
      tool: delete_entities
      args: {{entityNames: "$result.entities[*].name"}}
      kind: inverse
  create_relations:
    compensation:
      tool: delete_relations
      args: {{relations: "$args.relations"}}
  add_observations:
    compensation:
      tool: delete_observations
      args: {{deletions: "$result.results"}}
  delete_*: {{irreversible: true}}
  {READS}"""
ADA = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
BOB = {"name": "Bob", "entityType": "person", "observations": []}


def written(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_live_check_finds_each_kind_of_mistake_against_server_memory(tmp_path: Path) -> None:
    manifest = written(tmp_path, "mistakes.yaml", MISTAKES)

    done = reversi_cli("manifest", "check", manifest, "--upstream", MEMORY, *SCRATCH_MEMORY, cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [line.format(m=manifest) for line in MISTAKES_FOUND]


def test_a_server_that_prints_a_banner_on_stdout_is_checked_with_one_line_about_it_and_no_traceback(
    tmp_path: Path
) -> None:
    shipped = str(reversi.manifests.path("memory"))
    banner = shlex.join(["sh", "-c", f"echo 'memory server ready'; exec {MEMORY}"])

    done = reversi_cli("manifest", "check", shipped, "--upstream", banner, *SCRATCH_MEMORY, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: 1 manifest file checked against memory-server")
    assert done.stderr == "an upstream wrote a line to stdout that is not JSON-RPC, skipped: 'memory server ready'\n"


def test_a_draft_of_server_memory_passes_the_live_check(tmp_path: Path) -> None:
    env = ["--env", f"MEMORY_FILE_PATH={tmp_path}/memory.jsonl"]
    drafted = reversi_cli("manifest", "draft", "--upstream", MEMORY, *env, cwd=tmp_path)
    assert drafted.returncode == 0, drafted.stderr
    assert 'entityNames: "$result.entities[*].name"  # REVIEW: the name of each in the call\'s result entities' \
        in drafted.stdout
    manifest = written(tmp_path, "draft.yaml", drafted.stdout)

    checked = reversi_cli("manifest", "check", manifest, "--upstream", MEMORY, *env, cwd=tmp_path)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1] == "ok: 1 manifest file checked against memory-server 0.6.3 (9 tools)"


def drill(tmp_path: Path, manifest: str, tool: str, args: Any, *more: str) -> tuple[int, dict[str, Any]]:
    done = reversi_cli("--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", tool, "-m", manifest,
                       "--upstream", MEMORY, *SCRATCH_MEMORY, "--args", json.dumps(args), "--json", *more,
                       cwd=tmp_path)
    assert done.returncode in (0, 2), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_drills_on_server_memory_undo_through_the_engine_and_coverage_reports_them(tmp_path: Path) -> None:
    manifest = written(tmp_path, "memory.yaml", MEMORY_MANIFEST)
    ada_before = ["--setup", "create_entities=" + json.dumps({"entities": [ADA]})]

    code, restored = drill(tmp_path, manifest, "create_entities", {"entities": [ADA, BOB]}, *ada_before)
    assert code == 0 and restored["verdict"] == "restored"
    assert restored["forward"]["result"] == {"entities": [BOB]}  # Ada was there already: the server skipped her
    assert restored["before"] == restored["after"] == {"read_graph": {"entities": [ADA], "relations": []}}
    assert [e["type"] for e in restored["undo"]["events"]] == ["compensating", "compensated"]
    assert restored["undo"]["report"]["complete"] and restored["differences"] == []
    assert (restored["server"], restored["read_back"]) == ({"name": "memory-server", "version": "0.6.3"}, None)

    code, failed = drill(tmp_path, manifest, "add_observations",
                         {"observations": [{"entityName": "Ada", "contents": ["had a cat"]}]}, *ada_before)
    assert code == 2 and failed["verdict"] == "undo_failed"
    assert failed["differences"] == [
        'read_graph.entities[0].observations: ["wrote the first program"] -> ["wrote the first program","had a cat"]']
    assert "Invalid arguments for tool delete_observations" in failed["undo"]["report"]["failed"][0]["error"]

    # A call that changes nothing puts no undo to the test: not `restored`, and coverage keeps the drill that did.
    code, untested = drill(tmp_path, manifest, "create_entities", {"entities": []}, *ada_before)
    assert code == 2 and untested["verdict"] == "untested"
    assert untested["changed_by_call"] == [] and untested["differences"] == []
    assert restored["changed_by_call"] == ['read_graph.entities: [{"name":"Ada","entityType":"person","observations":'
                                           '["wrote the first program"]}] -> [{"name":"Ada","entityType":"person",'
                                           '"observations":["wrote the first program"]},{"name":"Bob",'
                                           '"entityType":"person","observations":[]}]']

    covered = reversi_cli("--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "coverage", "-m", manifest,
                          "--upstream", MEMORY, "--env", f"MEMORY_FILE_PATH={tmp_path}/m.jsonl", "--json",
                          cwd=tmp_path)
    assert covered.returncode == 0, covered.stderr
    rows = {row["tool"]: row for row in json.loads(covered.stdout)["tools"]}
    assert list(rows) == ["create_entities", "create_relations", "add_observations", "delete_entities",
                          "delete_observations", "delete_relations"]
    assert rows["create_entities"]["undo"] == "delete_entities (inverse)"
    assert rows["create_entities"]["drilled"] == {"drill_id": restored["drill_id"], "at": restored["at"],
                                                  "verdict": "restored", "undo_ran": True,
                                                  "entry_changed_since": False}
    assert rows["add_observations"]["drilled"]["verdict"] == "undo_failed"
    assert rows["create_relations"]["drilled"] is None and rows["delete_entities"]["undo"] == "irreversible"


def test_a_drill_shows_an_undo_that_takes_away_what_existed_before(tmp_path: Path) -> None:
    by_args = written(tmp_path, "by-args.yaml", MEMORY_MANIFEST.replace("$result.entities[*].name",
                                                                          "$args.entities[*].name"))
    done = reversi_cli("--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", "create_entities",
                       "-m", by_args, "--upstream", MEMORY, *SCRATCH_MEMORY,
                       "--args", json.dumps({"entities": [ADA]}),
                       "--setup", "create_entities=" + json.dumps({"entities": [ADA]}), cwd=tmp_path)

    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines()[:4] == [
        "drill create_entities on memory-server 0.6.3: differs",
        "  undo: step 0  create_entities  compensated -> delete_entities (1 attempt)",
        "  world (read_graph) differs after the undo:",
        f"    read_graph.entities: {json.dumps([ADA], separators=(',', ':'))} -> []",
    ]


FILESYSTEM_MANIFEST = """\
version: 1
tools:
  move_file:
    compensation:
      tool: move_file
      args: {source: "$args.destination", destination: "$args.source"}
      kind: inverse
  write_file:
    compensation:
      tool: write_file
      args: {path: "$args.path", content: ""}
  edit_file: {irreversible: true}
  create_directory: {idempotent: true}
  "*": {effect: read}
"""


def fs_drill(tmp_path: Path, tool: str, args: Any) -> tuple[int, dict[str, Any]]:
    manifest = written(tmp_path, "fs.yaml", FILESYSTEM_MANIFEST)
    done = reversi_cli(
        "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", tool, "-m", manifest,
        "--upstream", shlex.join(server("filesystem", "{scratch}")), "--args", json.dumps(args), "--json",
        "--setup", 'write_file={"path": "{scratch}/a.txt", "content": "alpha beta"}',
        "--read", 'directory_tree={"path": "{scratch}"}', "--read", 'read_text_file={"path": "{scratch}/a.txt"}',
        cwd=tmp_path,
    )
    assert done.returncode in (0, 2), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_drills_on_server_filesystem_put_a_moved_file_back_and_catch_an_undo_that_does_not(tmp_path: Path) -> None:
    code, moved = fs_drill(tmp_path, "move_file", {"source": "{scratch}/a.txt", "destination": "{scratch}/b.txt"})
    assert code == 0 and moved["verdict"] == "restored", moved
    tree = 'directory_tree {"path":"{scratch}"}'
    assert json.loads(moved["before"][tree]["content"]) == [{"name": "a.txt", "type": "file"}]
    assert moved["before"] == moved["after"]

    code, emptied = fs_drill(tmp_path, "write_file", {"path": "{scratch}/a.txt", "content": "gamma"})
    assert code == 2 and emptied["verdict"] == "differs"
    assert emptied["differences"] == ['read_text_file {"path":"{scratch}/a.txt"}.content: "alpha beta" -> ""']

    fs = shlex.join(server("filesystem", str(tmp_path)))
    covered = reversi_cli("--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "coverage",
                          "-m", str(tmp_path / "fs.yaml"), "--upstream", fs, cwd=tmp_path)
    assert covered.returncode == 0, covered.stderr
    lines = covered.stdout.splitlines()
    assert lines[-1] == "4 write tools, 2 drilled"
    assert [line.partition("  drilled ")[0] for line in lines[:-1]] == [
        "write_file  undo: write_file (compensation)",
        "edit_file  undo: irreversible  not drilled",
        "create_directory  undo: nothing to undo (idempotent)  not drilled",
        "move_file  undo: move_file (inverse)",
    ]


def test_drills_of_the_shipped_manifests_capture_before_the_call_and_find_a_dry_run_changed_nothing(
    tmp_path: Path,
) -> None:
    """The drill makes the entry's capture as the gateway does, so a delete or an overwrite is put back
    from what was read before it; a call the plan skips (a dry run) must leave the world as it was, and
    since no undo ran, it is `untested` (exit 2), not `restored`."""
    memory = str(reversi.manifests.path("memory"))
    code, deleted = drill(tmp_path, memory, "delete_entities", {"entityNames": ["Ada"]},
                          "--setup", "create_entities=" + json.dumps({"entities": [ADA]}))
    assert code == 0 and deleted["verdict"] in ("restored", "residue"), deleted
    assert deleted["after"]["read_graph"]["entities"] == [ADA]

    filesystem = str(reversi.manifests.path("filesystem"))
    for tool, args, verdict in (("write_file", {"path": "{scratch}/a.txt", "content": "gamma"}, (0, "restored")),
                                ("edit_file", {"path": "{scratch}/a.txt", "dryRun": True,
                                               "edits": [{"oldText": "beta", "newText": "alpha"}]}, (2, "untested"))):
        done = reversi_cli(
            "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", tool, "-m", filesystem,
            "--upstream", shlex.join(server("filesystem", "{scratch}")), "--args", json.dumps(args), "--json",
            "--setup", 'write_file={"path": "{scratch}/a.txt", "content": "alpha beta"}',
            "--read", 'read_text_file={"path": "{scratch}/a.txt"}', cwd=tmp_path,
        )
        evidence = json.loads(done.stdout)
        assert (done.returncode, evidence["verdict"]) == verdict, done.stdout + done.stderr
        assert evidence["after"]['read_text_file {"path":"{scratch}/a.txt"}'] == {"content": "alpha beta"}


def test_what_a_drill_cannot_do_is_one_line_and_exit_1(tmp_path: Path) -> None:
    manifest = written(tmp_path, "memory.yaml", MEMORY_MANIFEST)
    cases = [
        (["manifest", "drill", "open_nodes", "-m", manifest, "--upstream", MEMORY, *SCRATCH_MEMORY],
         "reversi: error: open_nodes needs no undo (its entry says read): nothing to drill"),
        (["manifest", "drill", "delete_entities", "-m", manifest, "--upstream", MEMORY, *SCRATCH_MEMORY],
         f"reversi: error: delete_entities is irreversible by its entry ({manifest}:16): nothing to drill"),
        (["manifest", "drill", "create_entities", "-m", manifest, "--upstream", MEMORY, *SCRATCH_MEMORY,
          "--args", '{"entities": "Ada"}'],
         "reversi: error: the forward call create_entities failed: "),
        (["manifest", "drill", "create_entities", "--upstream", MEMORY],
         "reversi: error: no manifests in force: pass -m FILE, set manifests: in reversi.yaml or REVERSI_MANIFEST"),
        (["manifest", "drill", "create_entities", "-m", manifest, "--upstream", MEMORY, *SCRATCH_MEMORY,
          "--args", '{"entities": []}', "--read", "nosuch={}"],
         "reversi: error: --read nosuch: the server offers no such tool"),
        (["manifest", "check", manifest, "--tools-list", manifest],
         f"reversi: error: {manifest} is not JSON: "),
    ]
    for args, said in cases:
        done = reversi_cli(*args, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (1, ""), done
        assert done.stderr.startswith(said) and len(done.stderr.splitlines()) == 1, done.stderr

    # what cannot be drilled is said before the warning about {scratch}, which is then beside the point
    unscratched = reversi_cli("manifest", "drill", "open_nodes", "-m", manifest, "--upstream", MEMORY, cwd=tmp_path)
    assert unscratched.returncode == 1 and unscratched.stderr.splitlines() == [
        "reversi: error: open_nodes needs no undo (its entry says read): nothing to drill"]


def test_the_check_and_the_draft_reach_a_server_over_streamable_http(tmp_path: Path) -> None:
    with everything_over_http() as url:
        drafted = reversi_cli("manifest", "draft", "--upstream", url, cwd=tmp_path)
        assert drafted.returncode == 0, drafted.stderr
        manifest = written(tmp_path, "everything.yaml", drafted.stdout)
        checked = reversi_cli("manifest", "check", manifest, "--upstream", url, cwd=tmp_path)
        unfit = reversi_cli("manifest", "check", written(tmp_path, "mistakes.yaml", MISTAKES), "--upstream", url,
                            cwd=tmp_path)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1].startswith("ok: 1 manifest file checked against mcp-servers/everything ")
    assert "  toggle-simulated-logging:\n" in drafted.stdout and "  echo:\n    effect: read\n" in drafted.stdout
    assert unfit.returncode == 1 and "toggle-simulated-logging may write" in unfit.stdout

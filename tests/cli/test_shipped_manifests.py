"""The manifests shipped for servers that cannot run here (GitHub's, Stripe's, Slack's) fit the tools
those servers list, as recorded in the package beside them; so does a draft made from each listing."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import reversi_cli

import reversi
from reversi.errors import ToolAnsweredError

MANIFESTS = Path(str(resources.files("reversi") / "manifests"))
SERVERS = {"github": "github-mcp-server v1.10.1 (117 tools)", "stripe": "Stripe 0.4.0 (22 tools)",
           "slack": "Slack MCP Server 1.0.0 (8 tools)"}


@pytest.mark.parametrize("name", SERVERS)
def test_a_shipped_manifest_passes_the_check_against_its_servers_recorded_tools(name: str, tmp_path: Path) -> None:
    listing = MANIFESTS / "listings" / f"{name}.json"

    done = reversi_cli("manifest", "check", str(MANIFESTS / f"{name}.yaml"), "--tools-list", str(listing),
                       cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"ok: 1 manifest file checked against {SERVERS[name]}"
    assert all(": warning: " in line for line in done.stdout.splitlines()[:-1]), done.stdout
    drafted = reversi_cli("manifest", "draft", "--tools-list", str(listing), cwd=tmp_path)
    (tmp_path / "draft.yaml").write_text(drafted.stdout)
    checked = reversi_cli("manifest", "check", "draft.yaml", "--tools-list", str(listing), cwd=tmp_path)
    assert (drafted.returncode, checked.returncode) == (0, 0), checked.stdout


def test_the_github_manifest_undoes_what_the_servers_own_tools_can_and_says_the_rest(tmp_path: Path) -> None:
    done = reversi_cli("manifest", "coverage", "-m", str(MANIFESTS / "github.yaml"), "--json",
                       "--tools-list", str(MANIFESTS / "listings" / "github.json"), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    rows = {row["tool"]: row["undo"] for row in json.loads(done.stdout)["tools"]}
    assert {tool: undo for tool, undo in rows.items() if undo != "irreversible"} == {
        "create_repository": "delete_repository (inverse)",
        "fork_repository": "delete_repository (inverse)",
        "star_repository": "unstar_repository (inverse)",
        "unstar_repository": "star_repository (inverse)",
        "create_or_update_file": "delete_file (compensation)",
        "create_issue": "update_issue_state (compensation)",
        "update_issue_state": "update_issue_state (compensation)",
        "update_issue_title": "update_issue_title (inverse)",
        "update_issue_body": "update_issue_body (compensation)",
        "update_issue_assignees": "update_issue_assignees (compensation)",
        "update_issue_labels": "update_issue_labels (inverse)",
        "add_sub_issue": "remove_sub_issue (inverse)",
        "remove_sub_issue": "add_sub_issue (compensation)",
        "create_pull_request": "update_pull_request_state (compensation)",
        "update_pull_request": "update_pull_request (compensation)",
        "update_pull_request_title": "update_pull_request_title (inverse)",
        "update_pull_request_body": "update_pull_request_body (compensation)",
        "update_pull_request_state": "update_pull_request_state (compensation)",
        "update_pull_request_draft_state": "update_pull_request_draft_state (compensation)",
        "resolve_review_thread": "unresolve_review_thread (inverse)",
        "unresolve_review_thread": "resolve_review_thread (inverse)",
    }
    assert len(rows) == 59 and "none declared" not in rows.values()


def _plan(ledger: reversi.Ledger, calls: list[tuple[str, dict[str, Any], Any, Any]]) -> dict[int, dict[str, Any]]:
    """Journal each (tool, args, capture answer or error, result) as the gateway would; the plan's actions."""
    run = ledger.start_run(actor="agent")
    for tool, args, before, result in calls:
        def read(_tool: str, _args: Any, before: Any = before) -> Any:
            if isinstance(before, Exception):
                raise before
            return before

        run.call(tool, args, lambda result=result, **_: result, capture=read)
    return {action["step"]: action for action in run.plan().to_dict()["actions"]}


def test_the_github_manifests_undos_get_the_arguments_the_servers_tools_take(tmp_path: Path) -> None:
    """Numbers and owners read out of a create's url, files deleted only when the run created them,
    edits written back from what issue_read and pull_request_read answered before the call."""
    repo = {"owner": "acme", "repo": "shop"}
    missing = ToolAnsweredError("Failed to get file contents. The path does not point to a file or directory, "
                                "or the file does not exist in the repository.")
    with reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(MANIFESTS / "github.yaml")]) as ledger:
        actions = _plan(ledger, [
            ("create_issue", {**repo, "title": "t"}, None, {"id": 9, "url": "https://github.com/acme/shop/issues/42"}),
            ("create_repository", {"name": "lab"}, None, {"id": 1, "url": "https://github.com/dana/lab"}),
            ("create_or_update_file", {**repo, "path": "a.md", "content": "x", "message": "m", "branch": "main"},
             missing, {"commit": {}}),
            ("create_or_update_file", {**repo, "path": "b.md", "content": "x", "message": "m", "branch": "main"},
             "successfully downloaded text file (SHA: abc)", {"commit": {}}),
            ("update_issue_title", {**repo, "issue_number": 42, "title": "new"},
             {"number": 42, "title": "old", "state": "open", "assignees": []}, {"id": 9}),
            ("update_pull_request", {**repo, "pullNumber": 7, "title": "t", "reviewers": ["bo"]},
             {"number": 7, "title": "old", "body": "b", "state": "open", "draft": False, "merged": False,
              "base": {"ref": "main"}}, {"id": 3}),
        ])
    assert actions[0]["args"] == {**repo, "state": "closed", "state_reason": "not_planned", "issue_number": 42}
    assert actions[1]["args"] == {"owner": "dana", "repo": "lab"} and actions[1]["needs_approval"] is True
    assert actions[2]["compensation_tool"] == "delete_file"
    assert actions[2]["args"]["message"].startswith("Undo step 2 of run_")
    assert actions[3]["kind"] == "unrecoverable" and "does not fit this call" in actions[3]["reason"]
    assert actions[4]["args"] == {**repo, "issue_number": 42, "title": "old"}
    assert actions[5]["kind"] == "unrecoverable" and "reviewers" in actions[5]["reason"]


def test_coverage_with_no_manifests_in_force_says_so_as_the_plan_does(tmp_path: Path) -> None:
    listing = str(MANIFESTS / "listings" / "slack.json")
    bare = reversi_cli("manifest", "coverage", "--tools-list", listing, cwd=tmp_path)
    with_slack = reversi_cli("manifest", "coverage", "-m", str(MANIFESTS / "slack.yaml"), "--tools-list", listing,
                             cwd=tmp_path)

    assert (bare.returncode, with_slack.returncode) == (0, 0), bare.stderr + with_slack.stderr
    assert bare.stdout.splitlines()[-2:] == [
        "8 write tools, 0 drilled",
        "note: no manifests in force: pass -m FILE, set manifests: in reversi.yaml or REVERSI_MANIFEST"]
    assert "note:" not in with_slack.stdout

"""The manifests shipped for servers that cannot run here (GitHub's, Stripe's, Slack's) fit the tools
those servers list, as recorded in the package beside them; so does a draft made from each listing."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from tests.cli.conftest import reversi_cli

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
    assert {tool: undo for tool, undo in rows.items() if undo not in ("irreversible", "none declared")} == {
        "create_repository": "delete_repository (inverse)",
        "fork_repository": "delete_repository (inverse)",
        "star_repository": "unstar_repository (inverse)",
        "unstar_repository": "star_repository (inverse)",
        "add_sub_issue": "remove_sub_issue (inverse)",
        "remove_sub_issue": "add_sub_issue (compensation)",
        "resolve_review_thread": "unresolve_review_thread (inverse)",
        "unresolve_review_thread": "resolve_review_thread (inverse)",
    }
    assert len(rows) == 59 and list(rows.values()).count("none declared") == 19

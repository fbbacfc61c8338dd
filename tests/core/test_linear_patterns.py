"""Manifest patterns run on RE2, never on a backtracking engine (issue #24, finding 6).

`^(a+)+$` against a result of many `a`s and a `!` took 6.9 s to plan at 27 characters, doubling with
each one: at 60 a backtracking engine would take years. RE2 runs it in time linear in the text; what
RE2 cannot run that way (backreferences, lookarounds, patterns too large) is refused by `manifest
check` and by every part that loads manifests, at its line, quoting the pattern.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import ServerProcess

import reversi
from reversi.core.json_values import JSONObjectView, quoted
from reversi.core.patterns import MAX_PROGRAM_SIZE, MAX_SCAN_CHARS, check_pattern, first_match
from reversi.core.references import ReferenceContext, RunContext, resolve
from reversi.engine.manifest_files import check_manifest_files
from reversi.errors import MissingReference

BIN = Path(sys.executable).parent
WAIT_S = 30.0
EVIL = "^(a+)+$"
HOSTILE_TEXT = "a" * 60 + "!"


def search_manifest(pattern: str) -> str:
    return ("version: 1\ntools:\n  notes.create:\n    compensation:\n      tool: notes.delete\n"
            f"      args: {{id: {{$search: \"$result.text\", pattern: '{pattern}'}}}}\n")


def ctx(result: object) -> ReferenceContext:
    return ReferenceContext(args={}, result=result, run=RunContext("run_x", "ana", "acme", "prod"), step=0)


def run(cwd: Path, command: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / command), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_the_pattern_that_backtracks_for_years_answers_at_once_on_re2() -> None:
    assert first_match(EVIL, HOSTILE_TEXT) is None
    assert first_match(EVIL, "a" * 60) == "a" * 60
    with pytest.raises(MissingReference, match="no match"):
        resolve({"$search": "$result.text", "pattern": EVIL}, ctx({"text": HOSTILE_TEXT}))


def test_search_keeps_its_groups_line_anchors_and_numbers() -> None:
    assert first_match("^On branch (\\S+)$", "Repository status:\nOn branch main\nclean") == "main"
    assert first_match("On branch \\S+", "On branch main") == "On branch main"
    assert first_match("/issues/(\\d+)$", "https://github.com/a/b/issues/42") == "42"
    assert first_match("(?i)^ID: (\\w+)", "id: x7") == "x7"
    assert first_match("(x)?y", "y") is None  # a group that took no part names nothing
    number: JSONObjectView = {"$search": "$result.url", "pattern": "/pull/(\\d+)$", "number": True}
    assert resolve(number, ctx({"url": "https://github.com/a/b/pull/7"})) == 7


def test_a_pattern_scans_only_the_first_part_of_a_long_text() -> None:
    assert first_match("(needle)", "x" * (MAX_SCAN_CHARS - 6) + "needle") == "needle"
    assert first_match("(needle)", "x" * MAX_SCAN_CHARS + "needle") is None


@pytest.mark.parametrize(("pattern", "why"), [
    ("(a)\\1", "invalid escape sequence: \\1"),
    ("foo(?=bar)", "invalid perl operator: (?="),
    ("(?<!x)y", "invalid perl operator: (?<"),
    ("(?P<n>a)(?P=n)", "invalid perl operator: (?P"),
    ("end\\Z", "invalid escape sequence: \\Z"),
    (".{300}x", f"it compiles to 2405 instructions, over the {MAX_PROGRAM_SIZE} a pattern may take"),
])
def test_check_refuses_what_re2_cannot_run_at_its_line_quoting_the_pattern(tmp_path: Path, pattern: str,
                                                                            why: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(search_manifest(pattern.replace("'", "''")))
    [problem] = check_manifest_files([path])
    assert problem.line == 6 and not problem.warning
    assert problem.message.startswith(f"$search.pattern {quoted(pattern)}: not a regular expression RE2 runs: ")
    assert why in problem.message and why in (check_pattern(pattern) or "")


def test_every_part_refuses_a_backreference_at_start_with_the_same_line(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(search_manifest("(a)\\1"))
    said = f'{tmp_path / "m.yaml"}:6: $search.pattern "(a)\\\\1": not a regular expression RE2 runs: ' \
           "invalid escape sequence: \\1"
    check = run(tmp_path, "reversi", "manifest", "check", str(tmp_path / "m.yaml"))
    assert (check.returncode, check.stdout) == (1, said + "\n")
    plan = run(tmp_path, "reversi", "plan", "run_x", "-m", str(tmp_path / "m.yaml"))
    assert (plan.returncode, plan.stderr) == (1, f"reversi: error: invalid manifest: {said}\n")
    server = run(tmp_path, "reversi-server", "--port", "0", "--db", f"sqlite:///{tmp_path}/r.db",
                 env={"REVERSI_MANIFEST": str(tmp_path / "m.yaml")})
    assert server.returncode == 1 and f"\n{said}\n" in server.stderr and "Traceback" not in server.stderr
    with pytest.raises(reversi.errors.ManifestError) as refused:
        reversi.open(f"sqlite:///{tmp_path}/r.db", manifests=[str(tmp_path / "m.yaml")])
    assert refused.value.problems == [said]


def test_a_hostile_result_plans_at_once_through_the_server_and_its_console(db_url: str, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(search_manifest(EVIL))
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run_ = ledger.start_run(actor="agent")
        run_.begin("notes.create", {}).succeeded({"text": HOSTILE_TEXT})
        run_id = str(run_.id)
    server = ServerProcess(db_url, {"REVERSI_MANIFEST": str(manifest)}, tmp_path / "server.log")
    try:
        with httpx.Client(base_url=server.url, timeout=WAIT_S) as client:  # no keys: loopback is the admin
            plan = client.get(f"/v1/runs/{run_id}/plan")
            assert plan.status_code == 200, plan.text
            [action] = plan.json()["actions"]
            assert "compensation arguments unavailable" in str(action)
            page = client.get("/")
            assert page.status_code == 200 and run_id in page.text
    finally:
        server.signal(signal.SIGKILL)


def test_manifest_patterns_are_compiled_in_one_place_only() -> None:
    """No module but `reversi.core.patterns` compiles a pattern that is not a constant of the code."""
    found = []
    for path in sorted(Path(reversi.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in {"compile", "search", "match", "fullmatch", "finditer", "findall", "sub"}
                    and node.args and not isinstance(node.args[0], ast.Constant | ast.JoinedStr)):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []

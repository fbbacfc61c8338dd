"""`reversi manifest drill --seed CMD` gives a scratch server data on disk before it starts (issue 28,
item 8): the shipped git manifest's `git_add` drilled on the real mcp-server-git, in a repository the
seed command made; a seed that fails stops the drill in one line, with nothing recorded."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests.cli.conftest import reversi_cli

import reversi.manifests

GIT_SERVER = str(Path(sys.executable).parent / "mcp-server-git")
SEED = """
import pathlib, subprocess, sys
repo = pathlib.Path(sys.argv[1]) / "repo"
repo.mkdir()
git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)
git("init", "-q", "-b", "main")
(repo / "a.txt").write_text("alpha\\n")
git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "a.txt")
git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
(repo / "b.txt").write_text("beta\\n")
"""


def test_a_seeded_repository_is_drilled_and_the_add_is_undone(tmp_path: Path) -> None:
    (tmp_path / "seed.py").write_text(SEED)
    done = reversi_cli(
        "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", "git_add",
        "-m", str(reversi.manifests.path("git")), "--upstream", GIT_SERVER,
        "--seed", shlex.join([sys.executable, str(tmp_path / "seed.py"), "{scratch}"]),
        "--args", '{"repo_path": "{scratch}/repo", "files": ["b.txt"]}',
        "--read", 'git_status={"repo_path": "{scratch}/repo"}', "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    drill = json.loads(done.stdout)
    assert drill["verdict"] == "restored", drill["differences"]
    assert any("b.txt" in line for line in drill["changed_by_call"])  # the add was seen, then undone


def test_a_seed_that_fails_stops_the_drill_in_one_line(tmp_path: Path) -> None:
    done = reversi_cli(
        "--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "drill", "git_add",
        "-m", str(reversi.manifests.path("git")), "--upstream", GIT_SERVER,
        "--seed", shlex.join([sys.executable, "-c", "import sys; sys.exit('no repo here\\x1b[31m')"]),
        "--args", '{"repo_path": "{scratch}/repo", "files": ["b.txt"]}', cwd=tmp_path)
    assert done.returncode == 1
    *warnings, line = done.stderr.splitlines()
    assert warnings == ["reversi: warning: {scratch} is in neither --upstream nor --env: a server that keeps its data "
                        "anywhere but its working folder is drilled on its real data"]
    assert line.startswith("reversi: error: --seed ") and "exited 1: no repo here" in line
    assert "\x1b" not in done.stderr
    listed = reversi_cli("--db", f"sqlite:///{tmp_path}/evidence.db", "manifest", "coverage", "-m",
                         str(reversi.manifests.path("git")), "--upstream", GIT_SERVER, cwd=tmp_path)
    assert listed.stdout.splitlines()[-1] == "5 write tools, 0 drilled"  # nothing recorded

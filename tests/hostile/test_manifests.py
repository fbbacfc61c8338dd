"""Hostile manifests: YAML bombs, deep nesting, tags that would run code elsewhere, huge and binary
files, and text generated to be almost YAML. The parser and `reversi manifest check` answer each with
problems of one line apiece; nothing raises, nothing is constructed, nothing hangs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import MANIFEST
from tests.hostile.fuzz import fuzz_settings, tried

from reversi.core.manifest import Problem, ToolEntry
from reversi.core.manifest_yaml import ALIAS_BUDGET, parse_manifest
from reversi.engine.manifest_files import MAX_MANIFEST_BYTES, check_manifest_files

REVERSI = Path(sys.executable).parent / "reversi"


def billion_laughs(levels: int) -> str:
    """Nine aliases of the level below at each level: 9**levels values once expanded."""
    lines = ['    l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return ("version: 1\ntools:\n  bomb.tool:\n    compensation:\n      tool: bomb.undo\n      args:\n"
            + "\n".join(lines).replace("    l", "        l") + f"\n        all: *l{levels - 1}\n")


HOSTILE: dict[str, str | bytes] = {
    "billion-laughs.yaml": billion_laughs(10),
    "alias-of-itself.yaml": "version: 1\ntools:\n  t:\n    compensation: &c\n      tool: u\n      args: {x: *c}\n",
    "deep-flow.yaml": "version: 1\ntools:\n  t:\n    compensation:\n      tool: u\n      args: {x: "
                      + "[" * 20000 + "]" * 20000 + "}\n",
    "deep-block.yaml": "version: 1\ntools:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(1500)),
    "python-object.yaml": "version: 1\ntools: !!python/object/apply:os.system ['touch pwned']\n",
    "python-name.yaml": "version: 1\ntools:\n  t: !!python/name:os.system {}\n",
    "custom-tag.yaml": "version: 1\ntools:\n  t: !vendor/thing {effect: read}\n",
    "bad-int-tag.yaml": "version: !!int abc\ntools:\n  t:\n    verification: {tool: u, retries: !!int ''}\n",
    "bad-float-tag.yaml": "version: 1\ntools:\n  t:\n    verification: {tool: u, backoff_ms: !!float zz}\n",
    "huge.yaml": b"version: 1\ntools:\n  t:\n    effect: read\n# " + b"x" * (MAX_MANIFEST_BYTES + 10),
    "binary.yaml": bytes(range(256)) * 64,
    "not-utf8.yaml": b"version: 1\ntools:\n  t\xe9:\n    effect: read\n",
    "nul.yaml": "version: 1\ntools:\n  t\x00: {effect: read}\n",
    "many-documents.yaml": "version: 1\ntools: {}\n---\nversion: 1\n",
    "empty.yaml": "",
}


def one_line_problems(problems: list[Problem]) -> None:
    for problem in problems:
        assert "\n" not in problem.message and "\r" not in problem.message, problem
        assert str(problem).count("\n") == 0


def test_each_hostile_manifest_is_a_problem_of_one_line_and_nothing_more(tmp_path: Path) -> None:
    paths = []
    for name, content in HOSTILE.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths.append(path)
        problems = check_manifest_files([path])
        one_line_problems(problems)
        assert [p for p in problems if not p.warning], name  # every one of them is refused
    tried("manifests", len(paths))
    assert not (tmp_path / "pwned").exists()
    said = check_manifest_files([tmp_path / "billion-laughs.yaml", tmp_path / "huge.yaml"])
    assert [p.message for p in said] == [
        f"the manifest's aliases repeat more than {ALIAS_BUDGET} values: write the values out instead",
        f"cannot read: larger than {MAX_MANIFEST_BYTES >> 20} MiB, which no manifest needs (is it the right file?)"]


def test_reversi_manifest_check_refuses_them_all_in_lines_of_its_own(tmp_path: Path) -> None:
    for name, content in HOSTILE.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    done = subprocess.run([str(REVERSI), "manifest", "check", *HOSTILE], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    tried("manifests", len(HOSTILE))
    assert done.returncode == 1 and done.stderr == "", done.stderr
    named = {line.split(":", 1)[0] for line in done.stdout.splitlines()}
    assert named == set(HOSTILE), done.stdout


# Pieces of YAML, put together at random into text that is almost a manifest.
FRAGMENTS = [
    "version: 1\n", "tools:\n", "  t.x:\n", "  '*':\n", "    compensation:\n", "    verification:\n", "      tool: u\n",
    "      args: ", "      expect: ", "    effect: ", "read", "write", "    requires: ", "    idempotency:\n",
    "      key: ", "{", "}", "[", "]", ", ", ": ", "- ", "? ", "&a ", "*a", "&b ", "*b", "<<: ",
    "!!python/object:os.system ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!binary ", "!!set ", "!vendor ",
    "%YAML 1.1\n", "---\n", "...\n",
    "$args.x", "$result.id", "$run.id", "$$", "${", "'", '"', "\\", "|\n", ">\n", "\n", "  ", "\t", "#", "yes", "~",
    "1e999", "-1", "0x1F", ".nan", "2026-12-03", "\x00", "\ufeff", "\ud800", "\x85", "\u2028",
]
YAMLISH = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=80).map("".join)
MUTATED = st.tuples(st.integers(0, len(MANIFEST)), st.integers(0, 40), st.text(max_size=8)).map(
    lambda cut: MANIFEST[: cut[0]] + cut[2] + MANIFEST[cut[0] + cut[1]:])


@fuzz_settings(ci=300)
@given(text=YAMLISH | MUTATED | st.text())
def test_text_that_is_almost_a_manifest_gives_entries_or_problems_of_one_line(text: str) -> None:
    tried("manifests")
    entries, problems = parse_manifest(text, "fuzz.yaml")
    assert all(isinstance(entry, ToolEntry) for entry in entries)
    one_line_problems(problems)


@fuzz_settings(ci=60)
@given(content=st.binary(max_size=2000) | YAMLISH.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_files_of_any_bytes_are_read_or_refused_as_problems(
    tmp_path_factory: pytest.TempPathFactory, content: bytes
) -> None:
    tried("manifests")
    path = tmp_path_factory.mktemp("m") / "fuzz.yaml"
    path.write_bytes(content)
    one_line_problems(check_manifest_files([path]))

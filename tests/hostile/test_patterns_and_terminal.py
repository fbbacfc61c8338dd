"""Hostile patterns and hostile text (issue #24, findings 6 and 7).

Patterns built to backtrack, to need what RE2 lacks, or to be no pattern at all go through the manifest
check (in process, and in batches through `reversi manifest check`): each is run by RE2 or refused in one
line at its own line, and a run pattern answers text built to make backtracking engines hang. Text of
every kind goes through the terminal sanitizer and through the real CLI: nothing a terminal acts on is
left in text output, and JSON output gives back every value exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.hostile.fuzz import fuzz_settings, tried

import reversi
from reversi.core.patterns import check_pattern, first_match
from reversi.core.printable import ESCAPED, for_terminal, json_for_terminal
from reversi.engine.manifest_files import check_manifest_files

BIN = Path(sys.executable).parent
WAIT_S = 60.0

ATOMS = st.sampled_from(["a", "b", "!", ".", "\\d", "\\w", "\\s", "\\S", "[ab]", "[^a]", "^", "$", "\\b", "\\1",
                         "\\Z", "\\z", "(?=a)", "(?!a)", "(?<=a)", "(?<!b)", "(?P=n)", "(?P<n>a)", "(?i)", "é", "[",
                         ")", "\\", "\\p{L}", "[[:alpha:]]", "\\Q.*\\E", "(?m)", "\\x{41}", "\\u0041"])
QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "+?", "{1000}", "{0,}", "**", "{,5}",
                               "{99}{99}", "++"])
# Printable text YAML can carry in a double-quoted scalar (astral characters would arrive as halves).
PLAIN = st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs", "Cc", "Zl", "Zp", "Co", "Cn"])


def _group(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"({t[0]}){t[1]}"),
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
    )


PATTERNS = st.recursive(st.tuples(ATOMS, QUANTIFIERS).map("".join), _group, max_leaves=12) | st.text(PLAIN,
                                                                                                       max_size=24)
# What the journal stores: any text but NUL (refused) and lone surrogates.
STORABLE = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
# Text that makes backtracking engines take exponential time on the patterns above.
HOSTILE_TEXTS = st.sampled_from(["a" * 60 + "!", "ab" * 40 + "!", "a" * 5000, "é" * 100 + "x", ""]) | st.text(
    max_size=300)


def manifest(patterns: list[str]) -> str:
    """One entry per pattern; the pattern of entry i is on line 6 + 4 * i."""
    entries = "".join(f"  t{i}.create:\n    compensation:\n      tool: t{i}.delete\n      args: {{id: {{$search: "
                      f"\"$result.text\", pattern: {json.dumps(p, ensure_ascii=False)}}}}}\n"
                      for i, p in enumerate(patterns))
    return f"version: 1\ntools:\n{entries}"


def refusal(pattern: str, why: str) -> str:
    return f"$search.pattern {json.dumps(pattern, ensure_ascii=False, separators=(',', ':'))}: " \
           f"not a regular expression RE2 runs: {why}"


@fuzz_settings(ci=300)
@given(pattern=PATTERNS, text=HOSTILE_TEXTS)
def test_a_pattern_is_run_in_linear_time_or_refused_in_one_line_at_its_line(tmp_path: Path, pattern: str,
                                                                           text: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(manifest([pattern]))
    problems = check_manifest_files([path])
    tried("patterns")
    why = check_pattern(pattern)
    if why is None:
        assert problems == [], (pattern, problems)
        found = first_match(pattern, text)  # answers: RE2 does not backtrack
        assert found is None or isinstance(found, str)
    else:
        [problem] = problems
        assert (problem.line, problem.message) == (6, refusal(pattern, why)), pattern
        assert "\n" not in problem.message and "\r" not in problem.message
        with pytest.raises(ValueError) as refused:
            first_match(pattern, text)
        assert str(refused.value) == why


@fuzz_settings(ci=4)
@given(patterns=st.lists(PATTERNS, min_size=1, max_size=25))
def test_reversi_manifest_check_answers_every_batch_of_patterns(tmp_path: Path, patterns: list[str]) -> None:
    (tmp_path / "m.yaml").write_text(manifest(patterns))
    try:
        done = subprocess.run([str(BIN / "reversi"), "manifest", "check", "m.yaml"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=WAIT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reversi manifest check was still running after {WAIT_S:g} s on {patterns!r}")
    tried("patterns", len(patterns))
    refused = [f"m.yaml:{6 + 4 * i}: {for_terminal(refusal(p, why))}" for i, p in enumerate(patterns)
               if (why := check_pattern(p)) is not None]
    assert done.returncode == (1 if refused else 0) and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == (refused or ["ok: 1 manifest file checked"])


def no_control_left(text: str, keep: str = "\n\t") -> bool:
    return not any((c in ESCAPED or unicodedata.category(c) == "Cc") and c not in keep for c in text)


@fuzz_settings(ci=500)
@given(text=st.text())
def test_the_sanitizer_leaves_no_control_character_and_json_gives_the_text_back(text: str) -> None:
    tried("terminal")
    shown = for_terminal(text)
    assert no_control_left(shown)
    assert for_terminal(shown) == shown  # what it shows is already safe
    assert (shown == text) == no_control_left(text)  # text with nothing to escape is left as it is
    value = {"text": text, text[:8]: [text]}
    for written in (json.dumps(value, ensure_ascii=False), json.dumps(value, ensure_ascii=False, indent=2)):
        safe = json_for_terminal(written)
        assert no_control_left(safe) and json.loads(safe) == value


@fuzz_settings(ci=3)
@given(texts=st.lists(st.text(STORABLE, min_size=1, max_size=40), min_size=1, max_size=6))
def test_what_agents_wrote_reaches_text_output_escaped_and_json_output_exact(tmp_path: Path, texts: list[str]) -> None:
    db = f"sqlite:///{tmp_path}/fuzz-{len(list(tmp_path.iterdir()))}.db"
    with reversi.open(db) as ledger:
        for i, text in enumerate(texts):
            run = ledger.start_run(actor=text, labels={"note": text})
            run.begin(f"t{i}.{text}", {"x": text}).succeeded({"y": text})
    tried("terminal", len(texts))
    listed = subprocess.run([str(BIN / "reversi"), "--db", db, "runs"], capture_output=True, text=True,
                            timeout=WAIT_S, cwd=tmp_path)
    assert listed.returncode == 0 and no_control_left(listed.stdout) and listed.stderr == "", listed
    as_json = subprocess.run([str(BIN / "reversi"), "--db", db, "runs", "--json"], capture_output=True, text=True,
                             timeout=WAIT_S, cwd=tmp_path)
    assert no_control_left(as_json.stdout)
    assert sorted(r["actor"] for r in json.loads(as_json.stdout)) == sorted(texts)

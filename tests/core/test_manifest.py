"""Manifests: parsing with lines, every problem kind, merging, lookup, and reading files."""

from __future__ import annotations

import textwrap
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reversi.core.manifest import (
    Compensation,
    CompensationKind,
    Effect,
    ManifestSet,
    Problem,
    ToolEntry,
    Verification,
    merge,
)
from reversi.core.manifest_yaml import parse_manifest
from reversi.engine.manifest_files import check_manifest_files, load_manifest_files
from reversi.errors import ManifestError

CONFORMANCE = """
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id", amount: "$args.amount"}
      kind: compensation
      residue: ["the charge still appears on the customer's statement"]
  stripe.get_charge:
    effect: read
  crm.upsert_contact:
    idempotent: true
  email.send:
    irreversible: true
  stripe.create_payment_intent:
    compensation:
      tool: stripe.cancel_payment_intent
      args: {payment_intent: "$result.id"}
      kind: inverse
    verification:
      tool: stripe.get_payment_intent
      args: {id: "$result.id"}
      expect: {status: canceled}
      retries: 2
      backoff_ms: 10
  payments.wire:
    requires_approval: true
    requires: ["payments.*"]
    compensation:
      tool: payments.recall_wire
      args: {wire: "$result.id"}
      requires_approval: true
  shop.place_order:
    idempotency:
      key: ["$args.order_id", "${run.tenant}"]
    compensation:
      tool: shop.cancel_order
      args: {order_id: "$args.order_id"}
"""


def parse(text: str, source: str = "m.yaml") -> tuple[list[ToolEntry], list[Problem]]:
    return parse_manifest(textwrap.dedent(text), source)


def problems_of(text: str) -> list[str]:
    return [str(problem) for problem in parse(text)[1]]


def tools(body: str) -> str:
    """A manifest whose `tools:` is `body`; the body's first line is line 3."""
    return "version: 1\ntools:\n" + textwrap.indent(textwrap.dedent(body), "  ")


def test_the_conformance_manifest_parses_without_problems_or_warnings() -> None:
    entries, problems = parse(CONFORMANCE)
    assert problems == []
    by_name = {entry.pattern: entry for entry in entries}
    charge = by_name["stripe.create_charge"]
    assert charge.compensations == (Compensation(
        tool="stripe.refund",
        args={"charge_id": "$result.id", "amount": "$args.amount"},
        kind=CompensationKind.COMPENSATION,
        requires_approval=False,
        residue=("the charge still appears on the customer's statement",),
    ),)
    assert (charge.source, charge.line) == ("m.yaml", 4)
    assert by_name["stripe.get_charge"].effect is Effect.READ
    assert not by_name["stripe.get_charge"].needs_undo
    assert not by_name["crm.upsert_contact"].needs_undo
    assert by_name["email.send"].irreversible
    assert by_name["email.send"].needs_undo
    assert by_name["stripe.create_payment_intent"].verification == Verification(
        tool="stripe.get_payment_intent",
        args={"id": "$result.id"},
        expect={"status": "canceled"},
        retries=2,
        backoff_ms=10,
    )
    wire = by_name["payments.wire"]
    assert wire.requires_approval
    assert wire.requires == ("payments.*",)
    assert len(wire.compensations) == 1
    assert wire.compensations[0].requires_approval
    assert by_name["shop.place_order"].idempotency_key == ("$args.order_id", "${run.tenant}")


def test_an_entry_gets_the_defaults_for_what_it_leaves_out() -> None:
    entries, _ = parse(tools("t:\n  compensation: {tool: u}\n  verification: {tool: r}\n"))
    (entry,) = entries
    assert (entry.effect, entry.idempotent, entry.irreversible) == (Effect.WRITE, False, False)
    assert (entry.requires, entry.requires_approval, entry.idempotency_key) == ((), False, None)
    assert entry.compensations == (Compensation("u", {}, CompensationKind.COMPENSATION, False, ()),)
    assert entry.verification == Verification("r", {}, {}, 0, 200)


def test_a_zero_backoff_is_kept() -> None:
    entries, _ = parse(tools("t:\n  irreversible: true\n  verification: {tool: r, backoff_ms: 0}\n"))
    assert entries[0].verification is not None
    assert entries[0].verification.backoff_ms == 0


def test_an_empty_entry_is_a_write_with_a_warning() -> None:
    entries, problems = parse(tools("stripe.create_charge:\n"))
    assert [entry.pattern for entry in entries] == ["stripe.create_charge"]
    assert [str(problem) for problem in problems] == [
        "m.yaml:3: warning: stripe.create_charge has no compensation and is not marked irreversible: "
        'it will plan as unrecoverable ("no compensation declared")'
    ]
    assert problems[0].warning


def test_an_irreversible_entry_with_a_compensation_is_an_error() -> None:
    entries, problems = parse(tools("mail.send:\n  irreversible: true\n  compensation: {tool: mail.recall}\n"))
    assert entries == []
    assert [str(problem) for problem in problems] == [
        "m.yaml:3: mail.send is marked irreversible and declares a compensation: keep one "
        "(an irreversible call is never undone, so its compensation would never run)"
    ]
    assert not problems[0].warning


def test_reads_idempotent_irreversible_and_compensated_tools_get_no_warning() -> None:
    body = "a: {effect: read}\nb: {idempotent: true}\nc: {irreversible: true}\nd: {compensation: {tool: u}}\n"
    assert problems_of(tools(body)) == []


def test_the_digest_is_hex_sha256_and_changes_with_any_edit() -> None:
    def digest(body: str) -> str:
        return parse(tools(body))[0][0].digest

    base = digest("t: {irreversible: true}")
    assert len(base) == 64
    assert base == base.lower()
    assert int(base, 16) >= 0
    assert digest("t:\n  irreversible: true\n") == base
    assert digest("t: {irreversible: true, effect: write}") != base
    assert digest("t: {irreversible: true, requires: [x]}") != base


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("t:\n  foo: 1\n", 'm.yaml:4: unknown key "foo"'),
        ("t:\n  compensation:\n    tool: u\n    argz: {}\n", 'm.yaml:6: unknown key "argz"'),
        ("t:\n  irreversible: true\n  verification: {tool: r, retry: 1}\n", 'm.yaml:5: unknown key "retry"'),
        (
            "t:\n  idempotency: {key: [$args.x], scope: run}\n  irreversible: true\n",
            'm.yaml:4: unknown key "scope"',
        ),
    ],
)
def test_an_unknown_key_is_named_with_its_line(body: str, expected: str) -> None:
    assert expected in problems_of(tools(body))


def test_an_unknown_top_level_key_is_named() -> None:
    assert problems_of("version: 1\ntools: {}\nextra: 1\n") == ['m.yaml:3: unknown key "extra"']


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("idempotent: yes", 'idempotent: expected true or false, got "yes"'),
        ('idempotent: "true"', 'idempotent: expected true or false, got "true"'),
        ("irreversible: 1", "irreversible: expected true, false or a sentence saying what stays, got 1"),
        ("requires_approval: [true]", "requires_approval: expected true, false or conditions on $args, got a list"),
        ("effect: sometimes", 'effect: "sometimes" is not one of read, write'),
        ("effect: 3", "effect: 3 is not one of read, write"),
        ("effect: READ", 'effect: "READ" is not one of read, write'),
        ("requires: github.create_repo", 'requires: expected a list of strings, got "github.create_repo"'),
        ("requires: [1]", "requires: expected a string, got 1"),
        ("compensation: [u]", 'compensation[0]: expected a mapping, got "u"'),
        (
            "compensation: {tool: u, kind: undo}",
            'compensation.kind: "undo" is not one of inverse, compensation',
        ),
        ("compensation: {tool: u, args: [1]}", "compensation.args: expected a mapping, got a list"),
        (
            "compensation: {tool: u, requires_approval: no}",
            'compensation.requires_approval: expected true, false or conditions on $args, got "no"',
        ),
        (
            "compensation: {tool: u, residue: text}",
            'compensation.residue: expected a list of strings, got "text"',
        ),
        ("compensation: {tool: 5}", "compensation.tool: expected a tool name, got 5"),
        ("compensation: {tool: ''}", 'compensation.tool: expected a tool name, got ""'),
        (
            "verification: {tool: r, retries: -1}",
            "verification.retries: expected a whole number >= 0, got -1",
        ),
        (
            "verification: {tool: r, retries: true}",
            "verification.retries: expected a whole number >= 0, got true",
        ),
        (
            "verification: {tool: r, retries: '3'}",
            'verification.retries: expected a whole number >= 0, got "3"',
        ),
        (
            "verification: {tool: r, backoff_ms: 1.5}",
            "verification.backoff_ms: expected a whole number >= 0, got 1.5",
        ),
        ("verification: {tool: r, expect: ok}", 'verification.expect: expected a mapping, got "ok"'),
        (
            "idempotency: {key: $args.x}",
            'idempotency.key: expected a non-empty list of references, got "$args.x"',
        ),
        ("idempotency: {key: []}", "idempotency.key: expected a non-empty list of references, got a list"),
        ("idempotency: [x]", "idempotency: expected a mapping, got a list"),
    ],
)
def test_a_wrong_type_or_value_is_quoted_with_the_line_of_the_value(line: str, expected: str) -> None:
    text = tools(f"t:\n  # the value is on line 5\n  {line}\n")
    entries, problems = parse(text)
    assert entries == []
    assert [str(problem) for problem in problems if not problem.warning] == [f"m.yaml:5: {expected}"]


@pytest.mark.parametrize(
    "body",
    [
        "compensation:\n    tool: u\n    args:\n      id: $reslt.id\n",
        "irreversible: true\n  verification:\n    tool: r\n    args:\n      id: $reslt.id\n",
        "irreversible: true\n  verification:\n    tool: r\n    expect:\n      id: $reslt.id\n",
        "irreversible: true\n  idempotency:\n    key:\n      - $reslt.id\n",
    ],
)
def test_a_bad_reference_is_named_with_the_line_of_its_value(body: str) -> None:
    text = tools(f"t:\n  {body}")
    line = text.splitlines().index(next(ln for ln in text.splitlines() if "$reslt" in ln)) + 1
    assert problems_of(text) == [f'm.yaml:{line}: bad reference "$reslt.id"']


def test_bad_references_are_found_deep_inside_args_and_in_interpolated_text() -> None:
    body = "t:\n  compensation:\n    tool: u\n    args:\n      a: [{b: x}, {c: 'n ${nope} ${args.ok}'}]\n"
    assert problems_of(tools(body)) == ['m.yaml:7: bad reference "${nope}"']


def test_a_literal_dollar_is_written_doubled() -> None:
    assert problems_of(tools("t:\n  compensation: {tool: u, args: {note: $$5}}\n")) == []


@pytest.mark.parametrize("block", ["compensation", "verification"])
def test_a_block_without_tool_is_reported_at_its_key(block: str) -> None:
    text = tools(f"t:\n  irreversible: true\n  {block}:\n    args: {{}}\n")
    assert problems_of(text) == [f'm.yaml:5: {block}: missing "tool"']


def test_an_empty_compensation_block_is_missing_its_tool() -> None:
    assert problems_of(tools("t:\n  compensation:\n")) == ['m.yaml:4: compensation: missing "tool"']


def test_idempotency_without_key_is_reported() -> None:
    assert problems_of(tools("t:\n  irreversible: true\n  idempotency: {}\n")) == [
        'm.yaml:5: idempotency: missing "key"'
    ]


@pytest.mark.parametrize(
    ("body", "line", "key"),
    [
        ("a: {irreversible: true}\na: {irreversible: true}\n", 4, "a"),
        ("a:\n  irreversible: true\n  irreversible: false\n", 5, "irreversible"),
        ("a:\n  compensation: {tool: u, args: {x: 1, x: 2}}\n", 4, "x"),
    ],
)
def test_a_duplicated_key_in_one_mapping_is_reported_at_the_second(body: str, line: int, key: str) -> None:
    assert f'm.yaml:{line}: duplicate key "{key}"' in problems_of(tools(body))


def test_a_yaml_syntax_error_is_reported_with_its_line() -> None:
    (problem,) = problems_of("version: 1\ntools:\n  a: {irreversible: true\n  b: [\n")
    assert problem.startswith("m.yaml:")
    assert "invalid YAML" in problem
    (problem,) = problems_of("version: 1\ntools:\n\ta: 1\n")
    assert problem.startswith("m.yaml:3: invalid YAML")


@pytest.mark.parametrize("text", ["", "# only a comment\n", "~\n", "---\n"])
def test_an_empty_document_is_a_problem(text: str) -> None:
    assert problems_of(text) == ["m.yaml:1: the manifest is empty"]


@pytest.mark.parametrize(("text", "got"), [("- a\n", "a list"), ("tools\n", '"tools"')])
def test_a_document_that_is_not_a_mapping_is_a_problem(text: str, got: str) -> None:
    assert problems_of(text) == [f"m.yaml:1: expected a mapping with version and tools, got {got}"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tools: {}\n", 'm.yaml:1: missing "version"'),
        ("version: 2\ntools: {}\n", "m.yaml:1: version: expected 1, got 2"),
        ("version: '1'\ntools: {}\n", 'm.yaml:1: version: expected 1, got "1"'),
        ("version: 1\n", 'm.yaml:1: missing "tools"'),
        ("version: 1\ntools: [a]\n", "m.yaml:2: tools: expected a mapping, got a list"),
        ("version: 1\ntools:\n  a: 5\n", "m.yaml:3: a: expected a mapping, got 5"),
    ],
)
def test_version_and_tools_are_checked(text: str, expected: str) -> None:
    assert expected in problems_of(text)


def test_an_empty_tools_mapping_is_fine() -> None:
    assert parse("version: 1\ntools:\n") == ([], [])


def test_problems_come_in_line_order_and_bad_entries_are_left_out() -> None:
    body = "bad1: {effect: x}\ngood: {effect: read}\nbad2: {idempotent: yes}\n"
    entries, problems = parse(tools(body))
    assert [entry.pattern for entry in entries] == ["good"]
    assert [problem.line for problem in problems] == [3, 5]


def test_a_problem_prints_as_file_line_message_and_without_a_line_when_it_has_none() -> None:
    assert str(Problem("a.yaml", 3, "oops")) == "a.yaml:3: oops"
    assert str(Problem("a.yaml", 3, "hm", warning=True)) == "a.yaml:3: warning: hm"
    assert str(Problem("a.yaml", 0, "cannot read: gone")) == "a.yaml: cannot read: gone"


def entry(pattern: str, source: str = "a.yaml", line: int = 1) -> ToolEntry:
    return ToolEntry(pattern=pattern, source=source, line=line)


def test_a_tool_defined_in_two_files_names_both_and_keeps_the_first() -> None:
    first, second = entry("x", "a.yaml", 3), entry("x", "b.yaml", 7)
    manifests, problems = merge([[first], [second, entry("y", "b.yaml", 9)]])
    assert [str(problem) for problem in problems] == ['b.yaml:7: "x" is already defined in a.yaml:3']
    assert manifests.lookup("x") is first
    assert manifests.lookup("y") is not None


def test_an_exact_name_wins_over_any_glob() -> None:
    manifests, _ = merge([[entry("github.*"), entry("github.get_repo")]])
    found = manifests.lookup("github.get_repo")
    assert found is not None
    assert found.pattern == "github.get_repo"


def test_the_longest_matching_glob_wins() -> None:
    manifests, _ = merge([[entry("*"), entry("github.get_*"), entry("github.*")]])
    assert [manifests.lookup(name).pattern for name in ("github.get_x", "github.put", "other")] == [  # type: ignore[union-attr]
        "github.get_*",
        "github.*",
        "*",
    ]


def test_among_equal_length_globs_the_first_in_file_order_wins() -> None:
    manifests, _ = merge([[entry("a.*x", "one.yaml")], [entry("a.b*", "two.yaml")]])
    found = manifests.lookup("a.bx")
    assert found is not None
    assert found.source == "one.yaml"
    manifests, _ = merge([[entry("a.b*", "two.yaml")], [entry("a.*x", "one.yaml")]])
    found = manifests.lookup("a.bx")
    assert found is not None
    assert found.source == "two.yaml"


def test_lookup_is_case_sensitive_and_none_when_nothing_matches() -> None:
    manifests, _ = merge([[entry("GitHub.*"), entry("exact")]])
    assert manifests.lookup("github.x") is None
    assert manifests.lookup("EXACT") is None
    assert manifests.lookup("exact") is manifests.lookup("exact")


def test_question_marks_and_brackets_are_globs() -> None:
    manifests, _ = merge([[entry("t?"), entry("s[ab]")]])
    assert manifests.lookup("tx") is not None
    assert manifests.lookup("sb") is not None
    assert manifests.lookup("sc") is None


def test_an_empty_set_finds_nothing() -> None:
    assert ManifestSet.empty().lookup("anything") is None
    assert ManifestSet.empty().entries == ()


@given(st.lists(st.sampled_from(["a*", "a.*", "a.b*", "*", "a.b.c", "*.c", "a?b.c"]), unique=True))
def test_lookup_finds_the_exact_name_else_the_longest_then_first_glob(patterns: list[str]) -> None:
    manifests, _ = merge([[entry(pattern) for pattern in patterns]])
    found = manifests.lookup("a.b.c")
    if "a.b.c" in patterns:
        assert found is not None
        assert found.pattern == "a.b.c"
        return
    globs = [p for p in patterns if p != "a.b.c" and fnmatchcase("a.b.c", p)]
    if not globs:
        assert found is None
        return
    longest = max(len(p) for p in globs)
    assert found is not None
    assert found.pattern == next(p for p in globs if len(p) == longest)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_loading_files_reads_parses_and_merges_in_order(tmp_path: Path) -> None:
    one = write(tmp_path, "one.yaml", CONFORMANCE)
    two = write(tmp_path, "two.yaml", tools("github.*: {effect: read}\n"))
    manifests = load_manifest_files([one, str(two)])
    found = manifests.lookup("github.get_repo")
    assert found is not None
    assert found.source == str(two)
    assert manifests.lookup("stripe.get_charge") is not None


def test_loading_raises_with_every_problem_but_ignores_warnings(tmp_path: Path) -> None:
    warned = write(tmp_path, "w.yaml", tools("t: {}\n"))
    assert load_manifest_files([warned]).lookup("t") is not None
    bad = write(tmp_path, "bad.yaml", tools("t: {effect: x}\nu: {idempotent: yes}\n"))
    with pytest.raises(ManifestError) as caught:
        load_manifest_files([warned, bad])
    assert caught.value.problems == [
        f'{bad}:3: effect: "x" is not one of read, write',
        f'{bad}:4: idempotent: expected true or false, got "yes"',
    ]


def test_a_missing_file_is_a_problem_without_a_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ManifestError) as caught:
        load_manifest_files([missing])
    assert caught.value.problems == [f"{missing}: cannot read: No such file or directory"]


def test_a_file_that_is_not_utf8_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    assert [str(problem) for problem in check_manifest_files([path])] == [f"{path}: cannot read: not UTF-8 text"]


def test_checking_files_returns_problems_warnings_and_duplicates_across_files(tmp_path: Path) -> None:
    one = write(tmp_path, "one.yaml", tools("t: {}\n"))
    two = write(tmp_path, "two.yaml", tools("x: {effect: read}\nt: {effect: read}\n"))
    found = [str(problem) for problem in check_manifest_files([one, two])]
    assert found == [
        f"{one}:3: warning: t has no compensation and is not marked irreversible: "
        'it will plan as unrecoverable ("no compensation declared")',
        f'{two}:4: "t" is already defined in {one}:3',
    ]


def test_the_conformance_check_example_names_file_and_line(tmp_path: Path) -> None:
    bad = write(
        tmp_path,
        "bad.yaml",
        """
        version: 1
        tools:
          stripe.create_charge:
            compensation:
              tool: stripe.refund
              args: {charge_id: "$reslt.id"}
          github.create_repo:
            effect: sometimes
        """,
    )
    assert [str(problem) for problem in check_manifest_files([bad])] == [
        f'{bad}:7: bad reference "$reslt.id"',
        f'{bad}:9: effect: "sometimes" is not one of read, write',
    ]


# -- hostile YAML (each found by tests/hostile/test_manifests.py) ---------------------------------


def test_a_yaml_bomb_is_refused_without_being_expanded() -> None:
    """Seven levels of nine aliases each: 4.8 million values once expanded, a few hundred bytes here."""
    levels = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 7)]
    body = "t:\n  compensation:\n    tool: u\n    args:\n" + "".join(f"      {line}\n" for line in levels)
    assert problems_of(tools(body)) == [
        "m.yaml:1: the manifest's aliases repeat more than 100000 values: write the values out instead"]


def test_aliases_that_share_a_value_a_few_times_are_fine() -> None:
    entries, found = parse(tools("a:\n  compensation: &undo {tool: u, args: {x: 1}}\nb:\n  compensation: *undo\n"))
    assert found == [] and [e.compensations for e in entries] == [(Compensation("u", {"x": 1}),)] * 2


def test_nesting_deeper_than_the_parser_follows_is_a_problem_not_a_crash() -> None:
    deep = tools("t:\n  compensation:\n    tool: u\n    args: {x: " + "[" * 5000 + "]" * 5000 + "}\n")
    assert problems_of(deep) == ["m.yaml:1: the manifest nests too deeply or refers to itself"]


@pytest.mark.parametrize(("value", "tag"), [
    ("!!python/object/apply:os.system ['touch pwned']", "!!python/object/apply:os.system"),
    ("!!python/name:os.system {}", "!!python/name:os.system"), ("!vendor/thing {}", "!vendor/thing"),
    ("!!binary aGk=", "!!binary"), ("!!set {a}", "!!set")])
def test_a_tag_asking_for_more_than_a_plain_value_is_refused(value: str, tag: str) -> None:
    said = f"m.yaml:3: unsupported YAML tag {tag}: a manifest holds plain values"
    assert problems_of(tools(f"t: {value}\n")) == [said]


def test_a_plain_tag_the_text_does_not_fit_leaves_the_text() -> None:
    assert problems_of("version: !!int abc\ntools:\n  t:\n    verification: {tool: u, retries: !!int '', "
                       "backoff_ms: !!float zz}\n") == [
        'm.yaml:1: version: expected 1, got "abc"', 'm.yaml:4: verification.retries: expected a whole number >= 0, '
        'got ""', 'm.yaml:4: verification.backoff_ms: expected a whole number >= 0, got "zz"']


def test_yaml_that_cannot_be_read_is_one_line_naming_the_character() -> None:
    assert problems_of("version: 1\x00\n") == ['m.yaml:1: invalid YAML: unacceptable character #x0000: special '
                                               'characters are not allowed in "<unicode string>", position 10']


def test_a_file_larger_than_any_manifest_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(tools("t: {effect: read}\n").encode() + b"#" * (4 << 20))
    assert [str(problem) for problem in check_manifest_files([path])] == [
        f"{path}: cannot read: larger than 4 MiB, which no manifest needs (is it the right file?)"]

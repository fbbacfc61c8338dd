"""Hostile values for every option and argument of every `reversi` command (read from the CLI's own
command table), through `main()` in this process for volume and the installed `reversi` for a sample.
Each ends with exit 0, 1 or 2, never a traceback; an error is one `reversi: error:` line; and a
command that fails leaves the store as it was.

`reversi demo` is left out: it runs a whole scenario and takes no options.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import MANIFEST
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.store_state import store_state

import reversi
from reversi.cli.main import cli, main

REVERSI = Path(sys.executable).parent / "reversi"


def commands() -> list[tuple[list[str], click.Command]]:
    """Every leaf command, with the words that name it."""
    ctx = click.Context(cli)
    found: list[tuple[list[str], click.Command]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
        elif path != ["demo"]:
            found.append((path, command))

    walk(cli, [])
    return found


COMMANDS = commands()
# Text as argv can carry it: no NUL, and bytes that are not UTF-8 arrive as surrogate escapes.
TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=30) | st.sampled_from(
    ["", " ", "-", "--", "-x", "--help", "x" * 10_000, "\udcff\udc80", "a\nb", "é", "'", '"', "$(touch pwned)",
     "; touch pwned", "`touch pwned`", "%s%n", "../../../etc/passwd", "\u202e", "1e309"])
NUMBERS = st.integers(-(2**70), 2**70).map(str) | st.sampled_from(["nan", "inf", "-inf", "1e308", "0x10", "1_0", "٣"])


class Place:
    """The folder the commands run in: a store with a run, an approval, a halt and a key; files of
    every kind for options that take one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "tools.yaml").write_text(MANIFEST)
        (root / "binary.yaml").write_bytes(bytes(range(256)))
        (root / "config.yaml").write_text(f"db: sqlite:///{root}/reversi.db\nkill_switch_file: {root}/kill\n")
        (root / "bad-config.yaml").write_text("db: [\n")
        (root / "dir.yaml").mkdir()
        self.db = f"sqlite:///{root}/reversi.db"
        with reversi.open(self.db, manifests=[str(root / "tools.yaml")]) as ledger:
            run = ledger.start_run("run_cli")
            run.begin("stripe.create_charge", {"amount": 5}).succeeded({"id": "ch_5"})
            run.begin("stripe.create_charge", {"amount": 6})
            run.begin("crm.upsert_contact", {"id": 1}).uncertain("timed out")
            try:
                run.begin("payments.wire", {"to": "x"})
            except reversi.errors.ApprovalRequired as asked:
                self.approval = asked.approval_id
            self.halt = ledger.add_halt("fuzz", tool="nothing.*").halt_id
            self.key = ledger.create_key("fuzz-agent", "agent")[0].key_id
        python = sys.executable
        files = ["tools.yaml", "binary.yaml", "config.yaml", "bad-config.yaml", "dir.yaml", "missing.yaml", "/dev/null"]
        self.values: dict[str, st.SearchStrategy[str]] = {
            "db": st.sampled_from([self.db, f"sqlite:///{root}/missing-dir/x/r.db", f"sqlite:///{root}/dir.yaml",
                                   f"sqlite:///{root}/binary.yaml", "postgresql://postgres@127.0.0.1:1/none",
                                   "postgresql://u:secret@[::1", "mysql://x", "sqlite://", ""]),
            "file": st.sampled_from(files) | TEXT,
            "run_id": st.sampled_from(["run_cli", "run_missing", "run_" + "a" * 65, "run_a b", ""]) | TEXT,
            "approval_id": st.sampled_from([self.approval, "apr_" + "0" * 32, "apr_x"]) | TEXT,
            "halt_id": st.sampled_from([self.halt, "halt_00000000-0000-0000-0000-000000000000", "halt_x"]) | TEXT,
            "key_id": st.sampled_from([self.key, "a" * 12, "A" * 12]) | TEXT,
            "cmd": st.sampled_from(["", "'unclosed", "/nonexistent/undo", "false", f"{python} -c 'import sys; "
                                    "sys.exit(3)'", f"{python} -c 'print(1)' ; touch pwned", "$(touch pwned)"]),
            "since": st.sampled_from(["30m", "2h", "7d", "2026-12-03", "999999999999d", "-1h", "0s"]) | TEXT,
            "older_than": st.sampled_from(["0s", "90d", "12h", "99999999d", "999999999999d", "-1h", "1y"]) | TEXT,
            "result_json": st.sampled_from(['{"id": "ch_6"}', "[" * 100_000, '"x"', "null", "{", "NaN",
                                            '{"a": "\\ud800"}']) | TEXT,
        }

    def value(self, param: click.Parameter) -> st.SearchStrategy[str]:
        kind = param.type
        if isinstance(kind, click.Choice):
            return st.sampled_from([str(c) for c in kind.choices]) | TEXT
        if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
            return NUMBERS | TEXT
        name = param.name or ""
        if name in ("manifests", "files", "config"):
            return self.values["file"]
        if name.endswith("_cmd"):
            return self.values["cmd"]
        return self.values.get(name, TEXT)


@st.composite
def invocations(draw: st.DrawFn, place: Place) -> list[str]:
    """One command line: global options, the command's words, then its parameters in any order."""
    path, command = draw(st.sampled_from(COMMANDS))
    argv = ["--db", draw(place.values["db"]) if draw(st.integers(0, 5)) == 0 else place.db]
    if draw(st.integers(0, 8)) == 0:
        argv += ["--config", draw(place.values["file"])]
    words: list[list[str]] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            if draw(st.integers(0, 9)):
                count = draw(st.integers(1, 3)) if param.nargs == -1 else 1
                words.append([draw(place.value(param)) for _ in range(count)])
        elif draw(st.booleans()):
            assert isinstance(param, click.Option)
            option = draw(st.sampled_from(param.opts))
            words.append([option] if param.is_flag else [option, draw(place.value(param))])
    if draw(st.integers(0, 9)) == 0:
        words.append([draw(TEXT)])
    return [*argv, *path, *(word for group in draw(st.permutations(words)) for word in group)]


def check_answer(argv: list[str], code: Any, out: str, err: str) -> None:
    assert code in (0, 1, 2), (argv, code, out[-500:], err[-500:])
    assert "Traceback" not in out + err, (argv, err[-2000:])
    if code == 1 and err:
        lines = err.splitlines()
        help_shown = lines[0].startswith("Usage:")
        assert help_shown or (len(lines) == 1 and lines[0].startswith("reversi: error: ")), (argv, err)


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    sys.stderr.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # as a real process's stderr
    try:
        main(argv)
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@fuzz_settings(ci=250)
@given(data=st.data())
def test_any_values_end_in_0_1_or_2_with_one_error_line_and_a_failure_changes_nothing(
    place: Place, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    argv = data.draw(invocations(place))
    before = store_state(place.db)
    code, out, err = run_main(argv, capsys)
    tried("cli")
    check_answer(argv, code, out, err)
    if code == 1:
        assert store_state(place.db) == before, (argv, err)
    assert not (place.root / "pwned").exists()


@fuzz_settings(ci=10)
@given(data=st.data())
def test_the_installed_command_answers_alike(place: Place, data: st.DataObject) -> None:
    argv = data.draw(invocations(place))
    before = store_state(place.db)
    done = subprocess.run([str(REVERSI), *argv], cwd=place.root, capture_output=True, timeout=120,
                          text=True, errors="surrogateescape")
    tried("cli")
    check_answer(argv, done.returncode, done.stdout, done.stderr)
    if done.returncode == 1:
        assert store_state(place.db) == before, (argv, done.stderr)

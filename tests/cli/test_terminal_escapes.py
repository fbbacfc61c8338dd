"""What agents, upstream servers and commands wrote reaches a terminal with its control characters
escaped (issue #24, finding 7: a tool name, an actor and a compensator's stderr cleared the screen,
wrote the clipboard and set the window title through `reversi show`, `runs`, `plan` and `rollback`).

Each command runs as the real `reversi` with a pseudo-terminal for stdout and stderr, as a person at a
terminal runs it; `--json` and `export` keep every value exact.
"""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.cli.conftest import reversi_cli
from tests.cli.test_commands import script

import reversi

WAIT_S = 30.0
REVERSI = Path(sys.executable).with_name("reversi")
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: put "pwned" on the clipboard
TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the window title
FLIP = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
# What must never reach the terminal as it is: the sequences' introducers and their terminator.
RAW = [b"\x1b[2J", b"\x1b]", b"\x07", FLIP.encode()]

TOOL = f"notes.create{CLEAR}"
ACTOR = f"ana{TITLE}"
WIRE = f"wire.send{CLIPBOARD}"
REASON = f"frozen{TITLE}"
STDERR_LINE = f"notes: gone{CLIPBOARD}{TITLE}{CLEAR}{FLIP}"
MANIFEST = """\
version: 1
tools:
  "notes.*":
    compensation:
      tool: notes.delete
      args: {id: "$result.id"}
  "wire.*":
    requires_approval: true
    irreversible: true
"""
# A compensator that fails, saying why on stderr in a line full of escape sequences.
UNDO = f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nsys.exit({STDERR_LINE!r})\n"


def in_terminal(here: Path, *args: str) -> bytes:
    """What `reversi ARGS` writes to a terminal (stdout and stderr are the same pseudo-terminal)."""
    primary, secondary = os.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"}
    proc = subprocess.Popen([str(REVERSI), *args], stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                            cwd=here, env=env)
    os.close(secondary)
    out = bytearray()
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            out += chunk
        else:
            pytest.fail(f"reversi {' '.join(args)} did not finish in {WAIT_S:g} s")
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
        proc.wait(WAIT_S)
    return bytes(out)


@pytest.fixture
def hostile_run(here: Path) -> str:
    """A run whose tool names, actor, label, arguments, result, approval and halt carry escapes."""
    (here / "tools.yaml").write_text(MANIFEST)
    script(here, "undo.py", UNDO)
    with reversi.open(manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run(actor=ACTOR, labels={"team": CLEAR})
        run.begin(TOOL, {"text": CLIPBOARD}).succeeded({"id": f"n1{FLIP}"})
        with pytest.raises(reversi.errors.ApprovalRequired):
            run.begin(WIRE, {"to": TITLE})
        ledger.add_halt(REASON, tool=f"x{CLEAR}*")
        return str(run.id)


def assert_escaped(out: bytes, *visible: str) -> None:
    for raw in RAW:
        assert raw not in out, f"{raw!r} reached the terminal: {out!r}"
    text = out.decode()
    for shown in visible:
        assert shown in text, f"{shown!r} is not shown in {text!r}"


def test_show_runs_and_plan_escape_what_the_agent_wrote(here: Path, hostile_run: str) -> None:
    assert_escaped(in_terminal(here, "show", hostile_run),
                   "notes.create\\x1b[2J", "actor=ana\\x1b]0;pwned\\x07", "team=\\x1b[2J", "\\u202e")
    assert_escaped(in_terminal(here, "runs"), "ana\\x1b]0;pwned\\x07")
    assert_escaped(in_terminal(here, "plan", hostile_run, "-m", "tools.yaml"), "notes.create\\x1b[2J")


def test_approvals_and_halts_escape_their_tools_and_reasons(here: Path, hostile_run: str) -> None:
    assert_escaped(in_terminal(here, "approvals", "list"), "wire.send\\x1b]52;c;cHduZWQ=\\x07")
    assert_escaped(in_terminal(here, "halt", "list"), "frozen\\x1b]0;pwned\\x07", '"x\\u001b[2J*"')


def test_rollback_escapes_the_compensators_stderr_in_its_progress_and_report(here: Path, hostile_run: str) -> None:
    out = in_terminal(here, "rollback", hostile_run, "-m", "tools.yaml", "--compensator-cmd", "./undo.py")
    assert_escaped(out, "notes: gone\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned\\x07\\x1b[2J\\u202e", "rollback INCOMPLETE")


def test_an_error_line_escapes_what_it_quotes(here: Path) -> None:
    out = in_terminal(here, "--config", f"/nowhere{TITLE}.yaml", "runs")
    assert_escaped(out, "reversi: error: config file /nowhere\\x1b]0;pwned\\x07.yaml does not exist")


def test_json_and_export_keep_every_value_exact(here: Path, hostile_run: str) -> None:
    shown = json.loads(reversi_cli("show", hostile_run, "--json", cwd=here).stdout)
    assert (shown["actor"], shown["labels"], shown["steps"][0]["tool"]) == (ACTOR, {"team": CLEAR}, TOOL)
    assert shown["steps"][0]["args"] == {"text": CLIPBOARD} and shown["steps"][0]["result"] == {"id": f"n1{FLIP}"}
    report = json.loads(reversi_cli("rollback", hostile_run, "-m", "tools.yaml", "--compensator-cmd", "./undo.py",
                                    "--json", cwd=here).stdout)
    assert report["failed"][0]["error"] == STDERR_LINE
    events = [json.loads(line) for line in reversi_cli("export", "--run", hostile_run, cwd=here).stdout.splitlines()]
    assert events[0]["actor"] == ACTOR and events[1]["data"] == {"tool": TOOL, "args": {"text": CLIPBOARD},
                                                                 "depends_on": [], "manifested": True}
    for args in (("show", hostile_run, "--json"), ("export", "--run", hostile_run)):
        assert_escaped(in_terminal(here, *args))  # the same JSON, its escapes JSON's own (\u001b, \u202e)


def test_every_line_the_cli_prints_goes_through_one_place() -> None:
    """Only `reversi.cli.context` calls `click.echo`: its `echo` escapes, its `echo_json` keeps JSON exact."""
    cli = Path(reversi.__file__).parent / "cli"
    found = [f"{path.name}:{node.lineno}" for path in sorted(cli.glob("*.py")) if path.name != "context.py"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr in {"echo", "secho", "print"}
             and isinstance(node.value, ast.Name) and node.value.id in {"click", "sys", "console"}]
    assert found == []

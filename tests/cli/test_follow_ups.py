"""Follow-ups (issue 30), on both stores: a rollback opens one for each step it leaves in the world whose
entry declares one (an irreversible email, a refund that fails), once, whatever the re-runs; each is
handed to `REVERSI_FOLLOW_UP_CMD`; another principal closes them with a note through the CLI; the run
is then *settled*, though not complete."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import reversi_cli

import reversi
from reversi.core.manifest_yaml import parse_manifest

MANIFEST = """
version: 1
tools:
  email.send:
    irreversible: "an email stays sent"
    follow_up:
      title: "Send a correction to ${args.to} about '${args.subject}'"
      text: "Reversi cannot unsend it. Step ${step} of ${run.id}."
      owner: support
      action: {tool: email.send, args: {to: "$args.to", subject: {$format: "Correction: {s}", s: "$args.subject"}}}
  stripe.create_charge:
    compensation: {tool: stripe.refund, args: {charge: "$result.id"}}
    follow_up: {title: "Refund ${result.id} by hand", owner: billing}
  crm.lookup:
    effect: read
"""
FAILS = f"{sys.executable} -c \"import sys; sys.exit('the card network is down')\""
HOOK = (f"{sys.executable} -c \"import sys, pathlib; "
        "pathlib.Path(sys.argv[1]).open('a').write(sys.stdin.read() + chr(10))\"")


@pytest.fixture
def run_id(db_url: str, here: Path) -> str:
    (here / "tools.yaml").write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.begin("stripe.create_charge", {"amount": 700}).succeeded({"id": "ch_1"})
        run.begin("email.send", {"to": "ada@example.com", "subject": "Your refund"}).succeeded({"sent": True})
        run.begin("crm.lookup", {"email": "ada@example.com"}).succeeded({})  # nothing to undo, nothing to follow
        return str(run.id)


def _cli(db_url: str, here: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    done = reversi_cli("--db", db_url, *args, cwd=here, env=env)
    try:
        shown: Any = json.loads(done.stdout)
    except ValueError:
        shown = done.stdout
    return done.returncode, shown, done.stderr


def test_a_rollback_opens_each_follow_up_once_and_people_close_them(db_url: str, here: Path, run_id: str) -> None:
    told = here / "told.jsonl"
    rollback = ("rollback", run_id, "-m", str(here / "tools.yaml"), "--compensator-cmd", FAILS, "--json")
    env = {"REVERSI_FOLLOW_UP_CMD": f"{HOOK} {told}"}
    code, report, err = _cli(db_url, here, *rollback, env=env)
    assert code == 2, err
    assert [(f["step"], f["status"], f["owner"]) for f in report["follow_ups"]] == [(0, "open", "billing"),
                                                                                     (1, "open", "support")]
    email = report["follow_ups"][1]
    assert email["title"] == "Send a correction to ada@example.com about 'Your refund'"
    assert email["text"] == f"Reversi cannot unsend it. Step 1 of {run_id}."
    assert email["action"] == {"tool": "email.send", "args": {"to": "ada@example.com",
                                                             "subject": "Correction: Your refund"}}
    assert email["why"] == "cannot be undone: an email stays sent"
    assert report["follow_ups"][0]["why"].startswith("its undo failed: ")
    assert report["settled"] is False
    handed = [json.loads(line) for line in told.read_text().splitlines()]
    assert [(h["run_id"], h["step"], h["title"]) for h in handed] == [
        (run_id, 0, "Refund ch_1 by hand"), (run_id, 1, email["title"])]

    # a re-run opens nothing again and tells the hook nothing again
    code, again, _ = _cli(db_url, here, *rollback, env=env)
    assert [f["follow_up_id"] for f in again["follow_ups"]] == [f["follow_up_id"] for f in report["follow_ups"]]
    assert len(told.read_text().splitlines()) == 2
    with reversi.open(db_url) as ledger:
        opened = [e for e in ledger.get_run(run_id).events() if e.type == "follow_up_opened"]
    assert [e.step for e in opened] == [0, 1]

    # another principal closes them, each with what was done
    ops = {"REVERSI_PRINCIPAL": "ops", "REVERSI_ACTOR": "dana"}
    code, listed, _ = _cli(db_url, here, "follow-ups", "list", run_id, "--open", "--json", env=ops)
    assert [f["step"] for f in listed] == [0, 1]
    for step, note in ((0, "refunded in the dashboard"), (1, "sent the correction")):
        code, closed, err = _cli(db_url, here, "follow-ups", "close", run_id, str(step), "--note", note, "--json",
                                 env=ops)
        assert code == 0, err
        assert (closed["status"], closed["closed_by"], closed["note"]) == ("closed", "dana", note)
    code, _, err = _cli(db_url, here, "follow-ups", "close", run_id, "1", "--note", "twice", env=ops)
    assert code == 1 and err.startswith(f"reversi: error: the follow-up of step 1 of {run_id} was closed by dana")
    code, _, err = _cli(db_url, here, "follow-ups", "close", run_id, "2", "--note", "x", env=ops)
    assert code == 1 and err.strip() == f"reversi: error: step 2 of {run_id} has no follow-up"
    code, shown, _ = _cli(db_url, here, "follow-ups", "list", run_id)
    assert shown.count("closed") == 2

    code, final, _ = _cli(db_url, here, *rollback, env=env)
    assert final["complete"] is False and final["settled"] is True  # what stays was taken care of by people


@pytest.mark.parametrize(("follow_up", "said"), [
    ("{owner: x}", 'missing "title"'),
    ("{title: 3}", "expected a text"),
    ("{title: x, action: {args: {}}}", 'missing "tool"'),
    ("{title: x, when: {}}", "when"),
    ('{title: "${nothing.here}"}', "m.yaml:5"),
])
def test_each_misuse_of_a_follow_up_is_said_at_its_line(follow_up: str, said: str) -> None:
    text = f"version: 1\ntools:\n  t:\n    irreversible: true\n    follow_up: {follow_up}\n"
    problems = [str(p) for p in parse_manifest(text, "m.yaml")[1]]
    assert any(said in p for p in problems), problems


def test_the_follow_up_command_may_not_be_empty(here: Path) -> None:
    (here / "reversi.yaml").write_text("follow_up_cmd: ' '\n")
    done = reversi_cli("runs", cwd=here, env={k: v for k, v in os.environ.items() if k != "REVERSI_FOLLOW_UP_CMD"})
    assert done.returncode == 1 and "follow_up_cmd is empty" in done.stderr


def test_a_follow_up_is_closed_when_a_later_rollback_undoes_its_step(db_url: str, here: Path, run_id: str) -> None:
    from tests.cli.conftest import UNDO

    rollback = ("rollback", run_id, "-m", str(here / "tools.yaml"), "--json", "--compensator-cmd")
    _, first, _ = _cli(db_url, here, *rollback, FAILS)
    assert [f["step"] for f in first["follow_ups"]] == [0, 1]  # the refund failed: someone must do it
    _, second, _ = _cli(db_url, here, *rollback, UNDO)  # the card network is back
    assert second["compensated"] == [0]
    assert [(f["step"], f["status"]) for f in second["follow_ups"]] == [(1, "open")]
    with reversi.open(db_url) as ledger:
        closed = next(f for f in ledger.get_run(run_id).follow_ups() if f.step == 0)
    assert (closed.status, closed.note) == ("closed", "undone by a later rollback")


def test_secrets_in_a_calls_values_are_masked_in_follow_ups_and_their_hook(db_url: str, here: Path) -> None:
    (here / "tools.yaml").write_text(MANIFEST.replace("about '${args.subject}'", "(login ${args.password})"))
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.start_run()
        run.begin("email.send", {"to": "ada@example.com", "subject": "s", "password": "hunter2-Sup3rS3cret"}
                  ).succeeded({"sent": True})
    told = here / "told.jsonl"
    code, report, err = _cli(db_url, here, "rollback", str(run.id), "-m", str(here / "tools.yaml"), "--json",
                             env={"REVERSI_FOLLOW_UP_CMD": f"{HOOK} {told}"})
    assert code == 2, err
    listed = _cli(db_url, here, "follow-ups", "list", str(run.id), "--json")[1]
    for shown in (json.dumps(report, ensure_ascii=False), told.read_text(),
                  _cli(db_url, here, "follow-ups", "list", str(run.id))[1], json.dumps(listed, ensure_ascii=False)):
        assert "hunter2" not in shown and "sensitive:" in shown, shown


def test_a_follow_up_the_hook_did_not_take_is_handed_again_by_the_next_rollback_once(
    db_url: str, here: Path, run_id: str
) -> None:
    told = here / "told.jsonl"
    said = []
    for cmd in ('"unterminated', f"{HOOK} {told}", f"{HOOK} {told}"):  # broken, then working twice
        code, report, err = _cli(db_url, here, "rollback", run_id, "-m", str(here / "tools.yaml"),
                                 "--compensator-cmd", FAILS, env={"REVERSI_FOLLOW_UP_CMD": cmd})
        assert code == 2, err
        said.append(report)
        if cmd.startswith('"'):
            assert not told.exists()
    assert ("its hook failed (the next rollback hands it again): follow_up_cmd (REVERSI_FOLLOW_UP_CMD): cannot parse"
            in said[0])
    handed = [json.loads(line) for line in told.read_text().splitlines()]
    assert sorted(h["step"] for h in handed) == [0, 1]  # by the second rollback, and not again by the third
    with reversi.open(db_url) as ledger:
        kinds = [e.type for e in ledger.get_run(run_id).events()]
    assert kinds.count("follow_up_opened") == 2 and kinds.count("follow_up_handed") == 2


def test_a_step_a_remote_worker_holds_gets_no_follow_up(db_url: str, here: Path, run_id: str) -> None:
    with reversi.open(db_url, manifests=[str(here / "tools.yaml")]) as ledger:
        run = ledger.get_run(run_id)
        run.begin_compensation(0, lease_s=300, worker="w1")  # its undo is under way elsewhere
        report = run.rollback(lambda call: {"undone": call["tool"]})
    assert [(f.step, f.attempts) for f in report.failed] == [(0, 0)]
    assert [f["step"] for f in report.follow_ups] == [1]  # the email's; not the refund a worker is making

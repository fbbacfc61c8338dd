"""`reversi show` lists the calls refused in a run, not only its steps (issue 29, item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import reversi_cli

import reversi
from reversi.errors import Halted


def test_a_refused_call_is_listed_with_what_was_asked_and_why(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        run = ledger.start_run()
        run.call("files.write", {"path": "a"}, lambda path: None)
        ledger.add_halt("disk incident", tool="files.*")
        with pytest.raises(Halted):
            run.call("files.write", {"path": "b\nstep 9  forged  succeeded"}, lambda path: None)
    shown = reversi_cli("--db", db, "show", run.id, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    refused = [line for line in shown.stdout.splitlines() if line.startswith("refused")]
    assert len(refused) == 1 and "kill switch: disk incident" in refused[0] and "files.write" in refused[0]
    assert not any(line.startswith("step 9") for line in shown.stdout.splitlines())
    as_json = json.loads(reversi_cli("--db", db, "show", run.id, "--json", cwd=tmp_path).stdout)
    (entry,) = as_json["refused"]
    assert (entry["tool"], entry["code"], entry["args"]) == ("files.write", "halted",
                                                             {"path": "b\nstep 9  forged  succeeded"})

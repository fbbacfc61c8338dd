"""Two overlapping rollbacks of many runs at once, in two processes (the real CLI): the runs they share are
each rolled back by one of them under the run's lease, a run the other holds is left to it and listed as
in progress, and every undo takes effect exactly once. A re-run finishes whatever is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.engine.test_crash import read_jsonl

import reversi

COMPENSATOR = Path(__file__).parent / "compensator.py"
MANIFEST = """\
version: 1
tools:
  notes.write:
    resources: ["note:${args.name}"]
    compensation: {tool: notes.restore, args: {name: "$args.name"}}
"""


def test_two_scopes_at_once_undo_each_step_once(db_url: str, tmp_path: Path) -> None:
    manifest = tmp_path / "notes.yaml"
    manifest.write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        for i in range(8):
            run = ledger.start_run(actor="bot" if i % 2 else "person", labels={"team": "red"})
            for n in range(3):
                run.begin("notes.write", {"name": f"n{i % 3}-{n}"}).succeeded("ok")
    witness = tmp_path / "witness"
    witness.mkdir()
    reversi_cli = str(Path(sys.executable).parent / "reversi")
    undo = f"{sys.executable} {COMPENSATOR} {witness}"
    scopes = [["--actor", "bot"], ["--label", "team=red"]]  # the second covers the first

    def start(scope: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen([reversi_cli, "--db", db_url, "rollback", *scope, "-m", str(manifest), "--json",
                                 "--compensator-cmd", undo], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "REVERSI_ROLLBACK_LEASE_S": "30"})

    both = [start(scope) for scope in scopes]
    outs = [p.communicate(timeout=300) for p in both]
    for p, (_, err) in zip(both, outs, strict=True):
        assert p.returncode in (0, 2), err
        assert "Traceback" not in err
    again = start(scopes[1])
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out, err)
    assert json.loads(out)["in_progress"] == []
    applied = Counter(a["key"] for a in read_jsonl(witness / "applied.log"))
    assert len(applied) == 24 and set(applied.values()) == {1}, "an undo took effect twice"
    with reversi.open(db_url) as ledger:
        statuses = {s.status.value for r in ledger.list_runs() for s in ledger.get_run(r.run.run_id).steps()}
    assert statuses == {"compensated"}

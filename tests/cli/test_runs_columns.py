"""`reversi runs` lines its columns up whatever the run ids and actors are (a noted misalignment: the
columns were fixed widths, so a long run id or actor pushed the rest of its row out of line)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import reversi_cli

import reversi


def test_columns_line_up_with_long_ids_and_actors_and_a_cell_stays_on_its_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    with reversi.open(db) as ledger:
        ledger.start_run("run_" + "x" * 60, actor="a-very-long-actor-name-from-a-scheduler", tenant="acme")
        ledger.start_run("run_short", actor="ann", tenant="t\\nfake").begin("t", {}).succeeded(None)
    lines = reversi_cli("--db", db, "runs", cwd=tmp_path).stdout.splitlines()
    assert len(lines) == 3
    starts = [[line.index(word) for word in ("CREATED", "ACTOR", "TENANT")] for line in lines[:1]]
    for line in lines[1:]:
        cells = line.split()
        assert [line.index(cells[1]), line.index(cells[2]), line.index(cells[3])] == starts[0]
    assert {len(line) for line in lines} == {len(lines[0])}  # the numbers end in one column too

"""Drill evidence in the store (migration 0008): kept whole, read back newest first, by tool and server."""

from __future__ import annotations

from tests.store.test_migrations import tables

import reversi
from reversi.core.drill import Drill, Verdict


def drill(
    drill_id: str, tool: str, at: str, server: str = "memory-server", verdict: Verdict = Verdict.RESTORED
) -> Drill:
    evidence = {"args": {"entities": [{"name": "Ada", "entityType": "person", "observations": ["é"]}]},
                "before": {"read_graph": {"entities": []}}, "differences": []}
    return Drill(drill_id, tool, server, "0.6.3", verdict, at, evidence)


def test_a_recorded_drill_reads_back_whole_and_newest_first_by_tool_and_server(db_url: str) -> None:
    with reversi.open(db_url) as ledger:
        ledger.record_drill(drill("drill_1", "create_entities", "2026-12-03T10:00:00.000000Z"))
        ledger.record_drill(drill("drill_2", "create_entities", "2026-12-03T11:00:00.000000Z", verdict=Verdict.DIFFERS))
        ledger.record_drill(drill("drill_3", "create_relations", "2026-12-03T12:00:00.000000Z"))
        ledger.record_drill(drill("drill_4", "create_entities", "2026-12-03T13:00:00.000000Z", server="other"))

        mine = ledger.drills(tool="create_entities", server="memory-server")
        assert [d.drill_id for d in mine] == ["drill_2", "drill_1"]
        assert mine[1] == drill("drill_1", "create_entities", "2026-12-03T10:00:00.000000Z")
        assert mine[0].verdict is Verdict.DIFFERS
        assert [d.drill_id for d in ledger.drills()] == ["drill_4", "drill_3", "drill_2", "drill_1"]
        assert [d.drill_id for d in ledger.drills(limit=1)] == ["drill_4"]
    assert tables(db_url)["drills"] == ["drill_id", "tool", "server_name", "server_version", "verdict", "at",
                                        "evidence"]

"""A drill's event loop also carries the MCP server's pipes: no store transaction opens on it (the
scratch store's, nor the evidence's), whatever the machine's load (`loop_watch` looks at threads)."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

from tests.gateway.conftest import UPSTREAM
from tests.gateway.test_drill import RESIDUE

import reversi
from reversi.core.surfaces import Surface
from reversi.gateway.drill import DrillRequest, run_drill
from reversi.store import loop_watch


def test_a_drill_opens_no_store_transaction_on_its_event_loop(tmp_path: Path) -> None:
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(RESIDUE)  # its undo needs an approval: the drill's, in its scratch store
    request = DrillRequest(tool="create_order", args={"order_id": "o-1"},
                           upstream=shlex.join([sys.executable, str(UPSTREAM), "{scratch}"]),
                           manifests=(str(manifest),), reads=(("get_order", {"order_id": "o-1"}),))
    with reversi.open(f"sqlite:///{tmp_path}/evidence.db", manifests=[str(manifest)]) as evidence:
        with loop_watch.watching() as on_a_loop:
            drill = asyncio.run(run_drill(request, evidence.as_local_admin(Surface.CLI)))
        assert [d.drill_id for d in evidence.drills()] == [drill.drill_id]
    assert drill.verdict.value == "residue", drill  # undone, as the entry declares
    assert not on_a_loop, "a store transaction opened on the drill's loop:\n" + "\n".join(on_a_loop[:3])

"""/metrics says when the soonest undo window of a standing step closes and how many close within a day,
on both stores; a server with no such step says -1 and 0."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.engine.test_windows import MANIFEST
from tests.server.conftest import Site

from reversi.core.times import format_time


def _gauge(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, text
    return float(found.group(1))


def test_metrics_show_the_soonest_window_and_those_closing_within_a_day(
    manifest: Path, make_site: Callable[..., Site]
) -> None:
    manifest.write_text(MANIFEST)
    site = make_site()
    empty = site.client().get("/metrics").text
    assert _gauge(empty, "reversi_undo_window_soonest_seconds") == -1
    assert _gauge(empty, "reversi_undo_windows_closing_24h") == 0

    other = make_site()  # a second server: the first caches its gauges for a minute
    now = datetime.now(UTC)
    run = other.ledger.start_run()
    for hours in (3, 20, 72):
        run.begin("bank.transfer", {}).succeeded({"id": f"t{hours}",
                                                  "recallable_until": format_time(now + timedelta(hours=hours))})
    text = other.client().get("/metrics").text
    assert 2.5 * 3600 < _gauge(text, "reversi_undo_window_soonest_seconds") <= 3 * 3600
    assert _gauge(text, "reversi_undo_windows_closing_24h") == 2

"""The server's retention task: applies `retention:` once an interval (the first pass soon after start),
in a thread of its own, so the event loop never waits for it.

Of several servers sharing a store, one at a time prunes: a pass takes the store's lease named
`retention` (the rollback leases' mechanism), and a server that finds it held does a dry run
instead, so that its `reversi_retention_held_runs` says what retention holds back, as the pruning
server's does (see `reversi.engine.retention.apply_retention`).
"""

from __future__ import annotations

import logging
import threading

from reversi.engine.ledger import Ledger
from reversi.errors import ReversiError
from reversi.server.metrics import Metrics

log = logging.getLogger("reversi.server")
FIRST_PASS_S = 60.0  # after start, at most: a server that restarts in a loop does not prune each time


class RetentionTask:
    """Applies the ledger's retention every `every_s` seconds, the first time after `min(every_s, FIRST_PASS_S)`."""

    def __init__(self, ledger: Ledger, metrics: Metrics, every_s: float) -> None:
        self.ledger, self.metrics, self.every_s = ledger, metrics, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reversi-retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the run being deleted now, if any."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        wait = min(self.every_s, FIRST_PASS_S)
        while not self._stop.wait(wait):
            try:
                done = self.ledger.apply_retention(self._stop.is_set, self.metrics.retention_pruned.inc)
            except ReversiError as exc:  # the store failed, or the lease was taken over: next time
                log.warning("retention: stopped: %s", exc.message)
                done = None
            if done is not None:
                self.metrics.retention_held.set(done.kept)
                if not done.dry_run:
                    log.info("retention: pruned %d runs opened before %s; %d held back", done.pruned, done.cutoff,
                             done.kept)
            wait = self.every_s

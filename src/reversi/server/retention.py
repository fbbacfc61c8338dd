"""The server's retention task: applies `retention:` once an interval (the first pass soon after start),
in a thread of its own, so the event loop never waits for it.

Of several servers sharing a store, one at a time applies it: a pass takes the store's lease named
`retention` (the rollback leases' mechanism: a fencing token, renewed while held, taken over from a
holder that died or stopped), and every deletion checks that token, so a pass that was taken over
deletes nothing more. A server that finds the lease held does a dry run instead, so that its
`reversi_retention_held_runs` says what retention holds back, as the pruning server's does.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from reversi.engine.ledger import Ledger
from reversi.engine.retention import LEASE_NAME, Pruning
from reversi.errors import ReversiError
from reversi.server.metrics import Metrics

log = logging.getLogger("reversi.server")
FIRST_PASS_S = 60.0  # after start, at most: a server that restarts in a loop does not prune each time


class RetentionTask:
    """Prunes the runs past `window` every `every_s` seconds, the first time after `min(every_s, FIRST_PASS_S)`."""

    def __init__(self, ledger: Ledger, window: timedelta, metrics: Metrics, every_s: float) -> None:
        self.ledger, self.window, self.metrics, self.every_s = ledger, window, metrics, every_s
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
                self.apply()
            except ReversiError as exc:  # the store failed, or the lease was taken over: next time
                log.warning("retention: stopped: %s", exc.message)
            wait = self.every_s

    def apply(self) -> None:
        """One pass: prune under the lease, or, when another server holds it, count what is held back."""
        lease = self.ledger.store.try_lock_run(LEASE_NAME, self.ledger.settings.rollback_lease_s)
        if lease is None:
            self._pass(Pruning(self.ledger.store, self.ledger.manifests, self.window, dry_run=True))
            return
        with lease:
            self._pass(Pruning(self.ledger.store, self.ledger.manifests, self.window, lease=lease,
                               stop=self._stop.is_set))

    def _pass(self, pruning: Pruning) -> None:
        pruned = kept = 0
        for outcome in pruning.run():
            if outcome.pruned and not pruning.dry_run:
                pruned += 1
                self.metrics.retention_pruned.inc()
            kept += not outcome.pruned
        if self._stop.is_set():
            return  # cut short: the count of what is held back would be short too
        self.metrics.retention_held.set(kept)
        if not pruning.dry_run:
            log.info("retention: pruned %d runs opened before %s; %d held back", pruned, pruning.cutoff, kept)

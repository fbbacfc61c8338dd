"""Pruning: the runs opened before the retention window that nothing keeps (`reversi.core.retention`),
deleted with every row of them, one transaction per run.

Runs are read a batch at a time and decided from what was read; with an export, the events of the
batch's runs that may go are written and fsync'd first. Then each run is deleted in a transaction of
its own, which takes the run's write lock, reads it again and decides again: a run that changed since
(a call, an approval, a rollback job) is kept, and a run whose journal grew since it was exported is
kept too, so the export holds every event of every run it deleted. A process killed midway leaves
whole runs, and running it again finishes the work.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from reversi.core import redaction
from reversi.core.json_values import LooseJSONObject, compact
from reversi.core.manifest import ManifestSet
from reversi.core.models import RunRecord
from reversi.core.retention import Hold, HoldKind, RetentionFacts, cutoff, holds
from reversi.core.sensitive import Masker
from reversi.engine.config import Settings
from reversi.errors import BadInput, ConfigError
from reversi.private_files import FILE_MODE
from reversi.store.base import Store
from reversi.store.leases import Lease
from reversi.store.queries import Queries

BATCH = 200  # runs read and decided together
LEASE_NAME = "retention"  # the lease a server takes to apply `retention:` (never a run id: those start `run_`)


@dataclass(frozen=True)
class PruneOutcome:
    """One run opened before the cutoff: pruned (or, in a dry run, would be) when `holds` is empty,
    else kept for those reasons."""

    run: RunRecord
    holds: tuple[Hold, ...] = ()

    @property
    def pruned(self) -> bool:
        return not self.holds

    def to_dict(self) -> LooseJSONObject:
        r = self.run
        out: LooseJSONObject = {"run_id": r.run_id, "created_at": r.created_at, "actor": r.scope.actor,
                           "tenant": r.scope.tenant}
        return out if self.pruned else out | {"kept_because": [h.to_dict() for h in self.holds]}


def retention_window(settings: Settings) -> timedelta:
    """The configured retention.

    Raises:
        ConfigError: none is configured.
    """
    if settings.retention is None:
        raise ConfigError("no retention window: set `retention: 90d` in reversi.yaml or REVERSI_RETENTION=90d")
    return settings.retention


@dataclass
class Pruning:
    """One pass of retention over `store`; iterate `run()` for each run's outcome.

    `dry_run` changes nothing (and writes no export). `export` is a new file that gets the events of
    each run before it goes, as `reversi export` prints them. `lease` (a server's hold on `LEASE_NAME`)
    is checked in every deletion, so a pass that was taken over deletes nothing more. `stop` is asked
    between runs.
    """

    store: Store
    manifests: ManifestSet
    window: timedelta
    now: datetime | None = None
    dry_run: bool = False
    export: Path | None = None
    lease: Lease | None = None
    stop: Callable[[], bool] = lambda: False
    # A new masker for each run the export shows (sensitive values masked, as `reversi export` prints them).
    masker: Callable[[], Masker] | None = None

    @property
    def cutoff(self) -> str | None:
        """Runs opened before this time are looked at (None: the window reaches before the calendar)."""
        return cutoff(self.now or datetime.now(UTC), self.window)

    def run(self) -> Iterator[PruneOutcome]:
        """Each run opened before the cutoff, oldest first, as it is decided (and deleted).

        Raises:
            BadInput: the export file exists already or cannot be written (nothing more is deleted).
            StoreUnavailable: the store failed; the runs deleted so far stay deleted, whole.
            Fenced: `lease` was taken over.
        """
        before = self.cutoff
        if before is None:
            return
        with _Export.open(None if self.dry_run else self.export) as export:
            after: tuple[str, str] | None = None
            while not self.stop():
                with self.store.read() as q:
                    batch = q.runs_opened_before(before, after, BATCH)
                    decided = [(facts, seq, holds(facts, self.manifests, before)) for facts, seq in _facts(q, batch)]
                if not batch:
                    return
                after = (batch[-1].created_at, batch[-1].run_id)
                yield from (PruneOutcome(facts.run, found) for facts, _, found in decided if found)
                going = [(facts.run, seq) for facts, seq, found in decided if not found]
                if self.dry_run:
                    yield from (PruneOutcome(run) for run, _ in going)
                    continue
                going = export.write(self.store, going, self.masker)
                for run, seq in going:
                    if self.stop():
                        return
                    outcome = self._delete(run, seq, before)
                    if outcome is not None:
                        yield outcome

    def _delete(self, run: RunRecord, seq: int | None, before: str) -> PruneOutcome | None:
        """Delete `run` if it still may go and its journal still ends at `seq`; None if it is gone already."""
        with self.store.write() as q:
            q.lock_run(run.run_id)
            if self.lease is not None:
                self.lease.check(q)
            if q.get_run(run.run_id) is None:
                return None  # another pass deleted it meanwhile
            facts, now_seq = _facts(q, [run])[0]
            kept = holds(facts, self.manifests, before) or ((Hold(HoldKind.RECENT),) if now_seq != seq else ())
            if not kept:
                q.delete_run(run.run_id)
            return PruneOutcome(run, kept)


def _facts(q: Queries, runs: Sequence[RunRecord]) -> list[tuple[RetentionFacts, int | None]]:
    """Retention's facts about each run, with the `seq` its journal ends at."""
    marks = q.run_marks([r.run_id for r in runs])
    found = []
    for snap in q.snapshots(runs):
        m = marks[snap.run.run_id]
        facts = RetentionFacts(snap, m.last_event_at, m.approval_pending, m.rollback_job, m.rollback_lease)
        found.append((facts, m.last_seq))
    return found


class _Export:
    """The export file of a pass: created new, written a batch at a time, each batch fsync'd."""

    def __init__(self, path: Path | None, file: IO[bytes] | None) -> None:
        self.path, self.file = path, file

    @classmethod
    def open(cls, path: Path | None) -> _Export:
        """Raises BadInput: the file exists already, or cannot be created."""
        if path is None:
            return cls(None, None)
        try:
            file = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE), "wb")
        except FileExistsError:
            raise BadInput(f"export file {path} exists already: give a new file (an export is never "
                           "overwritten)") from None
        except OSError as exc:
            raise BadInput(f"cannot create the export file {path}: {exc.strerror or exc}") from None
        _fsync_dir(path.parent)
        return cls(path, file)

    def write(self, store: Store, going: list[tuple[RunRecord, int | None]],
              masker: Callable[[], Masker] | None) -> list[tuple[RunRecord, int | None]]:
        """Write the events of `going`'s runs, durably; returns the runs with the `seq` their export
        ends at (a run's journal may have grown since it was decided: what was written counts).

        Raises:
            BadInput: the file cannot be written.
        """
        if self.file is None or not going:
            return going
        written = []
        lines: list[bytes] = []
        maskers = [masker() if masker is not None else None for _ in going]  # before the read: one may write its key
        with store.read() as q:
            for (run, _), masks in zip(going, maskers, strict=True):
                events = q.run_events(run.run_id)
                shown = redaction.events(masks, events) if masks is not None else events
                lines += [compact(e.to_dict()).encode() + b"\n" for e in shown]
                written.append((run, events[-1].seq if events else None))
        try:
            self.file.writelines(lines)
            self.file.flush()
            os.fsync(self.file.fileno())
        except OSError as exc:
            raise BadInput(f"cannot write the export file {self.path}: {exc.strerror or exc}; the runs not "
                           "written were kept") from None
        return written

    def __enter__(self) -> _Export:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


def _fsync_dir(folder: Path) -> None:
    """Make a new file's name durable (a folder that cannot be opened for that, say on some file
    systems, is left as it is: the file's own fsync still holds its content)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


@dataclass(frozen=True)
class PassResult:
    """What one pass of `apply_retention` did: `pruned` runs deleted (0 in a dry run), `kept` held back."""

    pruned: int
    kept: int
    cutoff: str | None
    dry_run: bool


def apply_retention(store: Store, manifests: ManifestSet, window: timedelta, *, lease_s: float,
                    stop: Callable[[], bool], on_pruned: Callable[[], None]) -> PassResult | None:
    """One pass of retention by a server: prune under the store's `LEASE_NAME` lease, or, while another
    process holds it, a dry run that counts what is held back. Calls `on_pruned` after each deletion;
    None when `stop` cut the pass short.

    Raises:
        StoreUnavailable: the store failed (what was deleted stays deleted, whole runs).
        Fenced: the lease was taken over midway.
    """
    lease = store.try_lock_run(LEASE_NAME, lease_s)
    pruning = Pruning(store, manifests, window, dry_run=lease is None, lease=lease, stop=stop)
    pruned = kept = 0
    try:
        for outcome in pruning.run():
            if outcome.pruned and not pruning.dry_run:
                pruned += 1
                on_pruned()
            kept += not outcome.pruned
    finally:
        if lease is not None:
            lease.release()
    return None if stop() else PassResult(pruned, kept, pruning.cutoff, pruning.dry_run)

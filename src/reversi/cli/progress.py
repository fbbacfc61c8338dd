"""The rollback's progress on a terminal. It goes to stderr, so `reversi rollback RUN > report.txt` still
shows it, and a rollback whose stderr is not a terminal shows none."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from reversi.core.printable import for_terminal
from reversi.engine.rollback import step_after

if TYPE_CHECKING:
    from rich.progress import Progress


class RollbackProgress:
    """A bar with `done/total` and the step being undone. Use as a context manager; pass it as the
    rollback's `progress` callback."""

    def __init__(self, run_id: str, total: int, after_step: int = -1, one_at_a_time: bool = True) -> None:
        """`total`: the steps the rollback covers, those after `after_step` (its scope's; -1: every one).
        `one_at_a_time`: the rollback undoes one step at a time, so the bar can say which."""
        self._after = after_step
        self._one_at_a_time = one_at_a_time
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._bar: Progress = Progress(
            TextColumn(f"rolling back {escape(for_terminal(run_id))}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[now]}"),
            console=Console(stderr=True), transient=True,
        )
        self._task = self._bar.add_task("", total=total, now=self._now(0, total))

    def __enter__(self) -> RollbackProgress:
        self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._bar.stop()

    def __call__(self, done: int, total: int) -> None:
        """The executor's callback: `done` of `total` steps are through."""
        self._bar.update(self._task, completed=done, total=total, now=self._now(done, total))

    def _now(self, done: int, total: int) -> str:
        step = step_after(done, total, self._after) if self._one_at_a_time else None
        return f"step {step}" if step is not None else ""

"""The handle a run hands out for one journaled call, to report its outcome on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from reversi.core.models import StepStatus
from reversi.engine import tracing
from reversi.errors import StoreUnavailable

if TYPE_CHECKING:
    from reversi.engine.run import Run


def _uncertain(exc: BaseException) -> bool:
    """A timeout or a broken connection may have let the call take effect; so may an interruption
    (KeyboardInterrupt, task cancellation) that cut the call off in flight."""
    return isinstance(exc, (TimeoutError, ConnectionError)) or not isinstance(exc, Exception)


class StepHandle:
    """A journaled `intended` call waiting for its outcome. One that is never reported stays `intended`."""

    def __init__(self, run: Run, index: int) -> None:
        self.run = run
        self.index = index
        self._reporting = False  # whether it has journaled (or tried to) the outcome: an exception
        # since is the caller's own, or the journal's, and says nothing of the call

    def succeeded(self, result: object = None) -> None:
        self._report(StepStatus.SUCCEEDED, result=result)

    def failed(self, error: object = None) -> None:
        self._report(StepStatus.FAILED, error=_text(error))

    def uncertain(self, error: object = None) -> None:
        self._report(StepStatus.UNCERTAIN, error=_text(error))

    def _report(self, status: StepStatus, *, result: object = None, error: str | None = None) -> None:
        """Raises StoreUnavailable saying that the call was made when its outcome could not be journaled:
        the caller must not take it for a call that did not happen."""
        self._reporting = True
        try:
            self.run._ledger.recorder.outcome(self.run.record, self.index, status, result=result, error=error)
        except StoreUnavailable as exc:
            raise type(exc)(f"{exc.message}: the call was made, but its outcome was not journaled: step "
                            f"{self.index} of {self.run.id} stays intended (unresolved) until it is resolved") from exc
        tracing.ended(self.run.id, self.index, status.value)

    def _from_exception(self, exc: BaseException) -> None:
        """Journal what an exception says of the call, unless its outcome was reported already (the
        exception came after, and is the caller's own business) or reporting it failed: then the
        exception is the journal's own, says nothing of the call, and the step stays `intended`
        (unresolved) rather than being called `failed` after it may have worked."""
        if not self._reporting:
            (self.uncertain if _uncertain(exc) else self.failed)(exc)


@contextmanager
def reporting(handle: StepHandle) -> Iterator[StepHandle]:
    """An exception from the block is the call's outcome (unless already reported), and is re-raised."""
    try:
        yield handle
    except BaseException as exc:
        handle._from_exception(exc)
        raise


def _text(error: object) -> str | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    return str(error)

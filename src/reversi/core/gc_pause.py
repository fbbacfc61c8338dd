"""Pausing Python's cyclic garbage collector around bulk work that creates no cycles.

Loading or planning a run of 100,000 steps allocates millions of small objects; each allocation
burst triggers collections that walk every live object, which made the planner's time per step
grow with the run. None of these objects form cycles, so reference counting frees them anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block, restoring its previous state after.

    What the block made and kept (its result) is then counted with the oldest objects: left young, the
    first allocation after the block would start a collection that walks every one of them (a fifth of
    a snapshot's load), and they would stay alive through it anyway."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():  # (unfreezing would also thaw what someone else froze)
                gc.freeze()  # every tracked object to the permanent generation, the young count to zero
                gc.unfreeze()  # and from there into the oldest generation
            gc.enable()

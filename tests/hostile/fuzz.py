"""How many hostile inputs each family tries, and the tally of what was tried.

In `make test` every family tries a small, fixed set (hypothesis derandomized: the same inputs on
every run). A soak sets, before pytest starts (the suite's conftest clears REVERSI_* for each test):

    REVERSI_FUZZ_EXAMPLES=N    each fuzz test tries N inputs, freshly random
    REVERSI_FUZZ_TALLY=FILE    each test process appends `{"family": ..., "tried": ...}` lines to FILE

`python -m tests.hostile.fuzz FILE` sums a tally file by family.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings

_EXAMPLES = os.environ.get("REVERSI_FUZZ_EXAMPLES", "")
_TALLY = os.environ.get("REVERSI_FUZZ_TALLY", "")
SOAKING = _EXAMPLES.isdigit() and int(_EXAMPLES) > 0
_tried: Counter[str] = Counter()


def examples(ci: int) -> int:
    """The number of inputs a fuzz test tries: `ci` in `make test`, REVERSI_FUZZ_EXAMPLES in a soak."""
    return int(_EXAMPLES) if SOAKING else ci


def fuzz_settings(ci: int) -> settings:
    """Hypothesis settings for a fuzz test (no deadline: a loaded machine is not a finding)."""
    return settings(max_examples=examples(ci), deadline=None, database=None, derandomize=not SOAKING,
                    suppress_health_check=list(HealthCheck))


def tried(family: str, count: int = 1) -> None:
    """Count inputs of `family` as tried (written to the tally file when the process ends)."""
    _tried[family] += count


@atexit.register
def _write_tally() -> None:
    if _TALLY and _tried:
        with Path(_TALLY).open("a") as out:
            for family, count in sorted(_tried.items()):
                out.write(json.dumps({"family": family, "tried": count, "pid": os.getpid()}) + "\n")


def totals(path: Path) -> Counter[str]:
    """The tally file summed by family."""
    found: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            found[entry["family"]] += entry["tried"]
    return found


if __name__ == "__main__":
    for family, count in sorted(totals(Path(sys.argv[1])).items()):
        print(f"{family}: {count}")

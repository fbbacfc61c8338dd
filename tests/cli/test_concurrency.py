"""`reversi rollback --concurrency N`: the compensator commands of independent steps run side by side."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.cli.conftest import reversi_cli
from tests.cli.test_progress import record_charges

import reversi

# Each undo says it has started, then waits (60 s at most) until four undos have started: four at once,
# or the undo fails.
TOGETHER = """
import json, os, sys, time
call = json.load(sys.stdin)
here = sys.argv[1]
open(os.path.join(here, f"started-{call['step']}"), "w").close()
deadline = time.monotonic() + 60
while len([n for n in os.listdir(here) if n.startswith("started-")]) < 4:
    if time.monotonic() > deadline:
        sys.exit("fewer than four undos ever ran at once")
    time.sleep(0.01)
print(json.dumps({"undone": call["tool"]}))
"""


def test_the_undos_of_independent_steps_run_side_by_side(here: Path) -> None:
    run_id = record_charges(here, 4)
    (here / "together.py").write_text(TOGETHER)
    (here / "seen").mkdir()

    done = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--concurrency", "4", "--compensator-cmd",
                       f"{sys.executable} together.py seen", cwd=here)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:4] == [f"step {n}  stripe.create_charge  compensated -> stripe.refund (1 attempt)"
                                            for n in (3, 2, 1, 0)]


@pytest.mark.parametrize("bad", ["0", "65", "-1"])
def test_a_concurrency_out_of_range_is_refused_and_changes_nothing(here: Path, bad: str) -> None:
    run_id = record_charges(here, 1)

    refused = reversi_cli("rollback", run_id, "-m", "tools.yaml", "--concurrency", bad, "--compensator-cmd",
                          "true", cwd=here)

    assert refused.returncode == 1
    assert refused.stderr == f"reversi: error: --concurrency must be from 1 to 64, not {bad}\n"
    with reversi.open() as ledger:
        assert ledger.get_run(run_id).steps()[0].status.value == "succeeded"

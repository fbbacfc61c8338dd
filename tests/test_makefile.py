"""`make test` as a fresh clone runs it: the contract suite beside the repository is optional.

The tools the Makefile calls (python, ruff, mypy) are stand-ins that write down their arguments, so
the test sees what `make test` would run without running the suite inside itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[1]
TOOL = "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> \"$(dirname \"$0\")/calls\"\n"


def make(tmp_path: Path, target: str, *settings: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`make TARGET SETTINGS...` with stand-ins for the tools; what they were called with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "ruff", "mypy"):
        (bin_dir / name).write_text(TOOL)
        (bin_dir / name).chmod(0o755)
    stamp = tmp_path / "installed"
    stamp.touch()  # newer than pyproject.toml: nothing to install
    p = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"BIN={bin_dir}", f"STAMP={stamp}", *settings],
                       capture_output=True, text=True, timeout=60)
    calls = (bin_dir / "calls").read_text().splitlines() if (bin_dir / "calls").exists() else []
    return p, calls


def make_test(tmp_path: Path, conformance: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    return make(tmp_path, "test", f"CONFORMANCE={conformance}")


def test_make_test_without_the_conformance_suite_says_so_in_one_line_and_passes(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-conformance"
    p, calls = make_test(tmp_path, missing)
    assert p.returncode == 0, p.stderr
    said = f"conformance suite not found at {missing}: skipped (set CONFORMANCE=DIR to run it)"
    assert p.stdout.splitlines() == [said]
    assert [c for c in calls if c.startswith("python")] == ["python -m pytest tests -q -n 2"]


def test_make_test_runs_the_conformance_suite_when_it_is_there(tmp_path: Path) -> None:
    suite = tmp_path / "conformance"
    suite.mkdir()
    p, calls = make_test(tmp_path, suite)
    assert p.returncode == 0, p.stderr
    assert [c for c in calls if c.startswith("python")] == [
        "python -m pytest tests -q -n 2", f"python -m pytest {suite} -q -n 2"]


def test_make_soak_runs_the_campaign_the_state_machine_then_the_fuzzers_and_faults_with_a_tally(
        tmp_path: Path) -> None:
    p, calls = make(tmp_path, "soak", "SEEDS=30")
    assert p.returncode == 0, p.stderr
    assert calls == ["python -m tests.reliability.soak --seeds 30",
                     "python -m pytest tests/reliability/test_state_machine.py -q -n 2 --hypothesis-profile=soak",
                     "python -m pytest tests/hostile tests/faults -q -n 2",
                     "python -m tests.hostile.fuzz .reversi/soak-tally.jsonl"]


def test_make_soak_with_a_seed_runs_that_seed_alone(tmp_path: Path) -> None:
    p, calls = make(tmp_path, "soak", "SEED=123")
    assert p.returncode == 0, p.stderr
    assert calls == ["python -m tests.reliability.soak --seed 123"]

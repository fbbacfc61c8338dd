"""The tests of the frameworks that cannot share this environment (own_env.py) pass in a virtualenv of
their own, on this checkout's code. A virtualenv that cannot be built fails the test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.conftest import PG_URL
from tests.integrations.own_env import HERE, OWN_ENVS, OwnEnv

ROOT = HERE.parents[1]


@pytest.mark.parametrize("env", OWN_ENVS, ids=lambda env: env.name)
def test_the_framework_tests_pass_in_their_own_virtualenv(env: OwnEnv, tmp_path: Path) -> None:
    if env.installed_here():
        pytest.skip(f"{env.module} is installed here, so {env.tests} runs in this suite")
    python = env.python()
    variables = {**os.environ, "PYTHONPATH": str(ROOT / "src")}  # reversi from this checkout, not the cache
    if PG_URL:
        variables["REVERSI_TEST_PG_URL"] = PG_URL
    p = subprocess.run([str(python), "-m", "pytest", str(HERE / env.tests), "-q", "-p", "no:cacheprovider",
                        f"--basetemp={tmp_path / 'pytest'}"],
                       cwd=ROOT, env=variables, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{env.tests} in {python}:\n{p.stdout}\n{p.stderr}"

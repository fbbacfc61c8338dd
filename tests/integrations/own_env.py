"""Frameworks that cannot share the test environment: their tests run in a virtualenv of their own.

CrewAI declares `mcp<2`, `openai<3` and `pydantic<2.13`: pip cannot install it beside the lock (nor
beside reversi's own `mcp>=2.3`). Such a framework gets a virtualenv built from
`<name>-requirements.txt` beside this file (tests/venvs.py: the framework's packages with `--no-deps`,
everything else at the lock's versions), and its test file runs there, on this checkout's code, from
tests/integrations/test_in_own_env.py. Where the framework is installed in the test environment
itself, its test file runs in the suite instead.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.venvs import venv_for

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class OwnEnv:
    """The tests in `tests` (a file beside this one) need `module`, installed from `name`-requirements.txt."""

    name: str
    module: str
    tests: str

    def installed_here(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except ModuleNotFoundError:  # its parent package is missing too
            return False

    def python(self) -> Path:
        """The virtualenv's Python, building the virtualenv first if it is not cached.

        Raises:
            subprocess.CalledProcessError: the build failed.
        """
        return venv_for(self.name, HERE / f"{self.name}-requirements.txt", sys.executable) / "bin" / "python"


OWN_ENVS = (OwnEnv("crewai", "crewai", "test_crewai.py"),)

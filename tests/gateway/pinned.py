"""Real servers that cannot share the test environment, each in a virtualenv of its own, built from
the pinned requirements beside this file by the first test that needs it: basic-memory needs Python
3.12 or newer, mcp-server-sqlite and FastMCP 2 an MCP SDK older than ours. The virtualenvs are cached
outside the clone, one per requirements file and Python (tests/venvs.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from tests.venvs import venv_for

_HERE = Path(__file__).resolve().parent


def _runs(python: str, least: tuple[int, int]) -> bool:
    try:
        found = subprocess.run([python, "-c", f"import sys; print(sys.version_info >= {least})"],
                               capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return found.stdout.strip() == "True"


@cache
def python_at_least(least: tuple[int, int]) -> str | None:
    """A Python of at least `least` on this machine: this one, one on PATH, or one pyenv installed."""
    candidates = [sys.executable, *(shutil.which(f"python3.{minor}") for minor in range(least[1], 16))]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob("3.*/bin/python3"), reverse=True)]
    return next((c for c in candidates if c and _runs(c, least)), None)


@dataclass(frozen=True)
class PinnedServer:
    """A server installed from `requirements` (a file beside this one) into its own virtualenv."""

    name: str
    version: str
    requirements: str
    entry: str  # the console script that starts it
    python: tuple[int, int] = (3, 11)

    def command(self, *args: str) -> list[str]:
        """The command that starts the server, building its virtualenv first if needed."""
        python = python_at_least(self.python)
        if python is None:
            pytest.skip(f"{self.name} needs Python {'.'.join(map(str, self.python))} or newer, and none was found "
                        "(PATH, pyenv)")
        return [str(venv_for(self.name, _HERE / self.requirements, python) / "bin" / self.entry), *args]


BASIC_MEMORY = PinnedServer("basic-memory", "0.24.1", "basic-memory-requirements.txt", "basic-memory", (3, 12))
SQLITE = PinnedServer("mcp-server-sqlite", "2025.4.25", "mcp-server-sqlite-requirements.txt", "mcp-server-sqlite")
FASTMCP = PinnedServer("fastmcp", "2.14.7", "fastmcp-requirements.txt", "python")  # runs a server script

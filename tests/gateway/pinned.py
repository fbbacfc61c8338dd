"""Real servers that cannot share the test environment, each in a virtualenv of its own, built from
the pinned requirements beside this file by the first test that needs it: basic-memory needs Python
3.12 or newer, mcp-server-sqlite and FastMCP 2 an MCP SDK older than ours. A virtualenv is built once per version
under .reversi/venvs, under a file lock, so parallel workers wait for one build."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_VENVS = _HERE.parents[1] / ".reversi" / "venvs"


def _runs(python: str, least: tuple[int, int]) -> bool:
    try:
        found = subprocess.run([python, "-c", f"import sys; print(sys.version_info >= {least})"],
                               capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return found.stdout.strip() == "True"


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

    @property
    def venv(self) -> Path:
        return _VENVS / f"{self.name}-{self.version}"

    def command(self, *args: str) -> list[str]:
        """The command that starts the server, building its virtualenv first if needed."""
        server = [str(self.venv / "bin" / self.entry), *args]
        stamp = self.venv / ".installed"
        if stamp.exists():
            return server
        python = python_at_least(self.python)
        if python is None:
            pytest.skip(f"{self.name} needs Python {'.'.join(map(str, self.python))} or newer, and none was found "
                        "(PATH, pyenv)")
        _VENVS.mkdir(parents=True, exist_ok=True)
        with open(_VENVS / f".{self.name}-{self.version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it: wait for that build
            if not stamp.exists():
                shutil.rmtree(self.venv, ignore_errors=True)
                subprocess.run([python, "-m", "venv", str(self.venv)], check=True, timeout=300)
                subprocess.run([str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r",
                                str(_HERE / self.requirements)], check=True, timeout=1200)
                stamp.touch()
        return server


BASIC_MEMORY = PinnedServer("basic-memory", "0.24.1", "basic-memory-requirements.txt", "basic-memory", (3, 12))
SQLITE = PinnedServer("mcp-server-sqlite", "2025.4.25", "mcp-server-sqlite-requirements.txt", "mcp-server-sqlite")
FASTMCP = PinnedServer("fastmcp", "2.14.7", "fastmcp-requirements.txt", "python")  # runs a server script

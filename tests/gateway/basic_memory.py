"""basic-memory, the real server, in a virtualenv of its own: it needs Python 3.12 or newer and pins
its own MCP stack, so it cannot share the test environment. The first test that needs it builds the
virtualenv under .reversi/venvs (once per version, under a file lock, so parallel workers wait for
one build) from the pinned requirements beside this file."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

VERSION = "0.24.1"
REQUIREMENTS = Path(__file__).with_name("basic-memory-requirements.txt")
VENV = Path(__file__).resolve().parents[2] / ".reversi" / "venvs" / f"basic-memory-{VERSION}"


def _runs(python: str) -> bool:
    try:
        found = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                               capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return found.stdout.strip() == "True"


def python_312() -> str | None:
    """A Python 3.12 or newer on this machine: on PATH, or one pyenv installed."""
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob("3.1[2-9]*/bin/python3"), reverse=True)]
    return next((c for c in candidates if c and _runs(c)), None)


def command() -> list[str]:
    """The command that starts basic-memory's MCP server on stdio, building its virtualenv first if needed."""
    server = VENV / "bin" / "basic-memory"
    stamp = VENV / ".installed"
    if stamp.exists():
        return [str(server), "mcp"]
    python = python_312()
    if python is None:
        pytest.skip("basic-memory needs Python 3.12 or newer, and none was found (PATH, pyenv)")
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f".basic-memory-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it: wait for that build
        if not stamp.exists():
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(VENV)], check=True, timeout=300)
            subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
                           check=True, timeout=1200)
            stamp.touch()
    return [str(server), "mcp"]

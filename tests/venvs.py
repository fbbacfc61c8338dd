"""Virtualenvs for what cannot share the test environment, built on demand from a requirements file
beside the tests that need them, and cached outside the clone so that a fresh clone on this machine
reuses them.

A virtualenv lives at ~/.cache/reversi-test-venvs/NAME-KEY (under $XDG_CACHE_HOME when it is set),
KEY the first 12 hex digits of the sha256 of the requirements file, the version of the Python it is
built with and, when the file installs under requirements-lock.txt, the lock. A file lock beside it
makes parallel workers (and parallel clones) wait for one build; a stamp inside marks it complete.
Nothing of the checkout is installed into one: a run that needs reversi puts the checkout's `src` on
PYTHONPATH itself, so a cached virtualenv never tests stale code.

A requirements file is installed with `pip install -r`, unless it has sections: the lines after
`# [--no-deps]` are installed first with `--no-deps` (packages whose declared ranges contradict the
lock, overridden on purpose), then the lines after `# [-c requirements-lock.txt]` under the lock, so
every locked package keeps its locked version.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"
NO_DEPS = "# [--no-deps]"
LOCKED = "# [-c requirements-lock.txt]"
UNUSED_DAYS = 30  # a cached virtualenv no run has used for this long is removed when its successor is built


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reversi-test-venvs"


@cache
def python_version(python: str) -> str:
    found = subprocess.run([python, "-c", "import sys; print(sys.version)"],
                           capture_output=True, text=True, timeout=60, check=True)
    return found.stdout.strip()


def sections(requirements: Path) -> dict[str, list[str]]:
    """The requirement lines of each section: "" (a file without sections), NO_DEPS, LOCKED."""
    found: dict[str, list[str]] = {"": [], NO_DEPS: [], LOCKED: []}
    section = ""
    for line in requirements.read_text().splitlines():
        line = line.strip()
        if line in (NO_DEPS, LOCKED):
            section = line
        elif line and not line.startswith("#"):
            found[section].append(line)
    return found


def venv_for(name: str, requirements: Path, python: str) -> Path:
    """The virtualenv of `requirements` built with `python`, building it first if it is not cached.

    Raises:
        subprocess.CalledProcessError: the build failed (it is tried again by the next caller).
    """
    parts = sections(requirements)
    digest = hashlib.sha256(requirements.read_bytes())
    digest.update(python_version(python).encode())
    if parts[LOCKED]:
        digest.update(LOCK.read_bytes())
    venv = cache_dir() / f"{name}-{digest.hexdigest()[:12]}"
    stamp = venv / ".installed"
    if not stamp.exists():
        _build(venv, requirements, parts, python)
        _remove_unused(name, venv)
    stamp.touch()  # when it was last used
    return venv


def _build(venv: Path, requirements: Path, parts: dict[str, list[str]], python: str) -> None:
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it: wait for that build
        if (venv / ".installed").exists():
            return
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        if parts[NO_DEPS] or parts[LOCKED]:
            steps = [[*pip, *options, *parts[section]] for section, options in
                     ((NO_DEPS, ["--no-deps"]), (LOCKED, ["-c", str(LOCK)])) if parts[section]]
        else:
            steps = [[*pip, "-r", str(requirements)]]
        for step in steps:
            subprocess.run(step, check=True, timeout=1200)
        (venv / ".installed").touch()


def _remove_unused(name: str, keep: Path) -> None:
    """Older builds of `name` (another requirements file, lock or Python) that no run used for a while."""
    for old in keep.parent.glob(f"{name}-{'?' * 12}"):
        stamp = old / ".installed"
        if old != keep and stamp.exists() and time.time() - stamp.stat().st_mtime > UNUSED_DAYS * 86400:
            with open(old.parent / f".{old.name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                shutil.rmtree(old, ignore_errors=True)

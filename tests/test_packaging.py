"""Reversi installs beside the agent it protects: the wheel, into a clean virtualenv, with every framework
extra at the newest release the package index has (not the lock file's), runs the demo and the
runnable framework examples of docs/integrations.md. The package declares ranges, not pins, so a
user's resolver is free; this test is where a new release of a dependency that breaks us shows."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_doc_blocks import runnable_blocks

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = "langchain-agents,openai-agents,pydantic-ai,claude-agent-sdk,google-adk,otel"
INSTALL_S = 1200


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVERSI_", "PIP_CONSTRAINT", "VIRTUAL_ENV"))}
    env["PATH"] = f"{argv[0].rpartition('/')[0]}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The bin folder of a clean virtualenv with the wheel and every framework extra, newest versions: built
    once per test session, by whichever xdist worker comes first (the others wait on the lock and reuse it)."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    where = shared / "wheel"
    where.mkdir(exist_ok=True)
    with open(where / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / ".installed").exists():
            _install(where)
            (where / ".installed").touch()
    return where / "venv" / "bin"


def _install(where: Path) -> None:
    # Built from a copy of what the wheel holds: a build in the checkout writes there (build/, egg-info).
    source = where / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(where), str(source)], where,
                 INSTALL_S)
    if built.returncode != 0 and "No matching distribution" in built.stderr + built.stdout:
        pytest.skip(f"the package index cannot be reached to build the wheel: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    wheel = next(where.glob("reversi_undo-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True, timeout=300)
    python = where / "venv" / "bin" / "python"
    done = _run([str(python), "-m", "pip", "install", "-q", f"{wheel}[{EXTRAS}]"], where, INSTALL_S)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_wheel_is_named_reversi_undo_and_imports_as_reversi(installed: Path, tmp_path: Path) -> None:
    said = _run([str(installed / "python"), "-c", "import reversi, reversi.distribution as d; print(d.version())"],
                tmp_path)
    assert said.returncode == 0 and said.stdout.strip() == "0.1.0", said.stderr
    assert _run([str(installed / "reversi"), "--version"], tmp_path).stdout.strip() == "reversi, version 0.1.0"


def test_the_demo_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "reversi"), "demo"], tmp_path)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "4. The rollback" in done.stdout and "5. Before the agent -> after the rollback" in done.stdout, done.stdout


@pytest.mark.parametrize(("where", "code"), [(w, c) for w, lang, c in runnable_blocks()
                                             if w.startswith("docs/integrations.md") and lang == "python"])
def test_each_framework_example_runs_from_the_wheel_at_the_newest_framework(
    installed: Path, tmp_path: Path, where: str, code: str
) -> None:
    done = _run([str(installed / "python"), "-c", code], tmp_path)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_wheel_holds_every_sql_file_of_the_store(installed: Path, tmp_path: Path) -> None:
    listing = ("import importlib.resources as r; s = r.files('reversi.store'); m = s.joinpath('migrations')\n"
               "print(*(f.name for f in [*s.iterdir(), *m.iterdir()] if f.name.endswith('.sql')))")
    said = _run([str(installed / "python"), "-c", listing], tmp_path)
    store = ROOT / "src" / "reversi" / "store"
    shipped = sorted(p.name for p in [*store.glob("*.sql"), *store.glob("migrations/*.sql")])
    assert said.returncode == 0 and sorted(said.stdout.split()) == shipped, said.stderr

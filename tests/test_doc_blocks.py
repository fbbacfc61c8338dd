"""Every fenced block in the docs marked runnable (```` ```python runnable ```` or ```` ```sh runnable ````)
runs as written, in an empty folder, and succeeds: the docs cannot drift from the program."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(python|sh) runnable\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def runnable_blocks() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


BLOCKS = runnable_blocks()


def test_the_docs_have_runnable_blocks() -> None:
    """A marker mistyped in every page would make the test below check nothing."""
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize(("where", "language", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_runnable_block_runs_as_written(tmp_path: Path, where: str, language: str, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVERSI_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"

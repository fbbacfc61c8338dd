"""A folder inside the root flipped between a real folder and a symbolic link to a folder outside it,
over and over, while the fs tools act under it: nothing outside the root is ever created, changed or
deleted, and a call that reports failure changed nothing. Bounded iterations; no timing asserted."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from tests.connectors.conftest import CONNECTORS, files_under

from reversi.connectors import fs
from reversi.errors import ReversiError

FAST_CALLS = 400
MCP_CALLS = 200
HOLD_S = 0.0005
WAIT_S = 30


class Flipper:
    """Flips `root/sub` between the real folder (`root/held` meanwhile) and a link to `outside`."""

    def __init__(self, root: Path, outside: Path) -> None:
        self.sub, self.held, self.outside = root / "sub", root / "held", outside
        self.flipped = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._flip, daemon=True)

    def _flip(self) -> None:
        while not self.stop.is_set():
            os.rename(self.sub, self.held)
            os.symlink(self.outside, self.sub)
            self.flipped.set()
            time.sleep(HOLD_S)  # each state lasts long enough for a call to meet it (not a wait on anything)
            os.unlink(self.sub)
            os.rename(self.held, self.sub)
            time.sleep(HOLD_S)

    @contextmanager
    def running(self) -> Iterator[None]:
        self.thread.start()
        assert self.flipped.wait(WAIT_S), "the flipper never flipped"
        try:
            yield
        finally:
            self.stop.set()
            self.thread.join(WAIT_S)
        assert self.sub.is_dir() and not self.sub.is_symlink() and not self.held.exists()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The root with `sub/`, and a folder outside holding the same names (so a delete or move through
    the link would find something to act on)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in (root / "sub", outside):
        folder.mkdir(parents=True)
        for n in range(max(FAST_CALLS, MCP_CALLS)):
            (folder / f"d{n}.txt").write_text(f"delete me {n}\n")
            (folder / f"m{n}.txt").write_text(f"move me {n}\n")
    monkeypatch.setenv("REVERSI_FS_ROOT", str(root))
    return root, outside


def _call(n: int) -> tuple[str, dict[str, Any]]:
    """The n-th call: a write, a delete, a move or a make_dir, each under `sub/` and on names of its own."""
    return [("fs.write_file", {"path": f"sub/w{n}.txt", "content": f"written {n}\n"}),
            ("fs.delete", {"path": f"sub/d{n}.txt"}),
            ("fs.move", {"source": f"sub/m{n}.txt", "destination": f"sub/n{n}.txt"}),
            ("fs.make_dir", {"path": f"sub/dir{n}"})][n % 4]


def _check(sub: Path, outcomes: dict[int, bool]) -> None:
    """Each call's names in the real folder say whether it took effect: only when it said it did."""
    for n, succeeded in outcomes.items():
        tool = _call(n)[0]
        if tool == "fs.write_file":
            assert ((sub / f"w{n}.txt").exists(), n) == (succeeded, n)
        elif tool == "fs.delete":
            assert ((sub / f"d{n}.txt").exists(), n) == (not succeeded, n)
        elif tool == "fs.move":
            assert ((sub / f"m{n}.txt").exists(), (sub / f"n{n}.txt").exists(), n) == (not succeeded, succeeded, n)
        else:
            assert ((sub / f"dir{n}").is_dir(), n) == (succeeded, n)
    leftovers = [p.name for p in sub.iterdir() if p.name.startswith(".")]
    assert leftovers == []


FUNCTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "fs.write_file": fs.write_file, "fs.delete": fs.delete, "fs.move": fs.move, "fs.make_dir": fs.make_dir,
}
UNDOS: dict[str, Callable[..., dict[str, Any]]] = {"fs.move": fs.move_back, "fs.make_dir": fs.remove_dir}


def test_tools_called_directly_never_act_outside_the_root_while_a_folder_flips(world: tuple[Path, Path]) -> None:
    root, outside = world
    before = files_under(outside)
    outcomes: dict[int, bool] = {}
    results: list[dict[str, Any]] = []
    with Flipper(root, outside).running():
        for n in range(FAST_CALLS):
            tool, arguments = _call(n)
            try:
                results.append(FUNCTIONS[tool](**arguments))
                outcomes[n] = True
            except (ReversiError, OSError):
                outcomes[n] = False
    assert files_under(outside) == before
    _check(root / "sub", outcomes)

    with Flipper(root, outside).running():  # and their undos race it too
        for result in results:
            undo: Callable[..., dict[str, Any]] = UNDOS.get(result["reversi_seal"]["tool"], fs.restore)
            with suppress(ReversiError, OSError):
                undo(result=result)
    assert files_under(outside) == before
    assert [p.name for p in (root / "sub").iterdir() if p.name.startswith(".")] == []


@pytest.mark.anyio
async def test_the_served_tools_never_act_outside_the_root_while_a_folder_flips(world: tuple[Path, Path]) -> None:
    root, outside = world
    before = files_under(outside)
    outcomes: dict[int, bool] = {}
    params = StdioServerParameters(command=CONNECTORS, args=["serve", "fs"], env=dict(os.environ), cwd=os.getcwd())
    async with Client(params, cache=None) as client:
        call: Callable[[str, dict[str, Any]], Awaitable[Any]] = client.call_tool
        with Flipper(root, outside).running():
            for n in range(MCP_CALLS):
                answer = await call(*_call(n))
                outcomes[n] = not answer.is_error
    assert files_under(outside) == before
    _check(root / "sub", outcomes)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

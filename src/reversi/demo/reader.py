"""The demo's reader, run exactly as a user's `--reader-cmd` is:

    python -m reversi.demo.reader WORLD_JSON < read.json

It reads {"tool", "arguments"} on stdin and prints the tool's answer from the demo world as JSON,
so a declared read-back can prove an undo took effect. Exit 1 with the reason on stderr when it
cannot answer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from reversi.demo.world import World, WorldError, command_main


def _read(world: World, request: dict[str, Any]) -> Any:
    if not isinstance(request.get("tool"), str):
        raise WorldError('expected {"tool", "arguments"} on stdin')
    return world.read(request["tool"], request.get("arguments"))


def main(argv: Sequence[str] | None = None) -> int:
    return command_main("reader", "python -m reversi.demo.reader WORLD_JSON < read.json", _read, argv)


if __name__ == "__main__":
    sys.exit(main())

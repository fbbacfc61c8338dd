"""The demo's compensator, run exactly as a user's `--compensator-cmd` is:

    python -m reversi.demo.compensator WORLD_JSON < call.json

It reads the call JSON ({run_id, step, tool, original_tool, args, idempotency_key, attempt}) on
stdin, undoes the call in the demo world and prints the result as JSON. A call whose idempotency
key it has seen before does nothing again and prints the first result. Exit 1 with the reason on
stderr when it cannot undo the call.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from reversi.demo.world import World, command_main


def _undo(world: World, call: dict[str, Any]) -> Any:
    return world.compensate(call)


def main(argv: Sequence[str] | None = None) -> int:
    return command_main("compensator", "python -m reversi.demo.compensator WORLD_JSON < call.json", _undo, argv)


if __name__ == "__main__":
    sys.exit(main())

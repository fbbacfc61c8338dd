"""The demo's compensator, run exactly as a user's `--compensator-cmd` is:

    python -m reversi.demo.compensator WORLD_JSON < call.json

It reads the call JSON ({run_id, step, tool, original_tool, args, idempotency_key, attempt}) on
stdin, undoes the call in the demo world and prints the result as JSON. A call whose idempotency
key it has seen before does nothing again and prints the first result. Exit 1 with the reason on
stderr when it cannot undo the call.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from reversi.demo.world import World, WorldError


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m reversi.demo.compensator WORLD_JSON < call.json", file=sys.stderr)
        return 2
    try:
        call = json.loads(sys.stdin.read())
        if not isinstance(call, dict):
            raise WorldError("expected a JSON object on stdin")
        result = World(Path(args[0])).compensate(call)
    except (json.JSONDecodeError, WorldError, OSError) as exc:
        print(f"compensator: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

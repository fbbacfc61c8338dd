"""The demo's reader, run exactly as a user's `--reader-cmd` is:

    python -m reversi.demo.reader WORLD_JSON < read.json

It reads {"tool", "arguments"} on stdin and prints the tool's answer from the demo world as JSON,
so a declared read-back can prove an undo took effect. Exit 1 with the reason on stderr when it
cannot answer.
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
        print("usage: python -m reversi.demo.reader WORLD_JSON < read.json", file=sys.stderr)
        return 2
    try:
        request = json.loads(sys.stdin.read())
        if not isinstance(request, dict) or not isinstance(request.get("tool"), str):
            raise WorldError('expected {"tool", "arguments"} on stdin')
        answer = World(Path(args[0])).read(request["tool"], request.get("arguments"))
    except (json.JSONDecodeError, WorldError, OSError) as exc:
        print(f"reader: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Talking to the witness (`witness.py`) over its socket: one JSON line out, one back. Standard library only,
because it is also the compensator and reader commands Reversi runs, once per call:

    python witness_client.py compensate SOCKET     # a --compensator-cmd: the call JSON on stdin
    python witness_client.py read SOCKET           # a --reader-cmd: {"tool", "arguments"} on stdin
    python witness_client.py verify SOCKET         # a --verify-cmd: the call JSON on stdin

A refusal by the witness (a downstream error) is exit 1 with one line on stderr, as Reversi expects.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any


class WitnessError(Exception):
    """The witness answered with an error: the downstream refused or failed the call."""


class WitnessClient:
    """The witness listening on the abstract Unix socket `name` (Linux: no file, no path length limit)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def ask(self, request: dict[str, Any], timeout: float = 60.0) -> Any:
        """Send one request; return its answer's `result`. Raises WitnessError when it says `error`."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect("\0" + self.name)
            sock.sendall(json.dumps(request).encode() + b"\n")
            with sock.makefile("rb") as answer:
                line = answer.readline()
        if not line:
            raise ConnectionError("the witness closed the connection without answering")
        reply = json.loads(line)
        if "error" in reply:
            raise WitnessError(reply["error"])
        return reply.get("result")

    def forward(self, tool: str, args: dict[str, Any]) -> Any:
        """Make a forward call downstream (what an agent's tool does)."""
        return self.ask({"op": "forward", "tool": tool, "args": args})

    def compensate(self, call: dict[str, Any]) -> Any:
        """Run one compensation: the call JSON Reversi hands a compensator."""
        return self.ask({"op": "compensate", "call": call})

    def read(self, tool: str, arguments: Any) -> Any:
        """Run a read-back."""
        return self.ask({"op": "read", "tool": tool, "arguments": arguments})

    def arm(self, pid: int, after: int, delay_ms: float, label: str) -> None:
        """SIGKILL `pid` `delay_ms` after the `after`-th call from now (after 0: `delay_ms` from now)."""
        self.ask({"op": "arm", "pid": pid, "after": after, "delay_ms": delay_ms, "label": label})

    def disarm(self) -> bool:
        """Cancel the trigger, once a kill it has scheduled has landed; True if it had fired."""
        return bool(self.ask({"op": "disarm"}))

    def settle(self, quiet_ms: float) -> None:
        """Return once no call is in flight and none began for `quiet_ms`."""
        self.ask({"op": "settle", "quiet_ms": quiet_ms})


def main(argv: list[str]) -> int:
    command, name = argv[1], argv[2]
    request = json.loads(sys.stdin.read())
    client = WitnessClient(name)
    try:
        if command == "compensate":
            result = client.compensate(request)
        elif command == "verify":
            result = client.ask({"op": "verify", "call": request})
        else:
            result = client.read(request["tool"], request["arguments"])
    except WitnessError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""A stand-in downstream system for `command_compensator`, used by the crash tests.

Usage: compensator.py STATE_DIR [--phase NAME] [--fail-first N [--fail-step N]]
                      [--block before|after --block-step N --ready FIFO --gate FIFO]

Every invocation is appended to STATE_DIR/calls.log. The undo is applied at most once per
idempotency key, as a well-behaved API does: the first successful call creates
STATE_DIR/effects/KEY (atomically, written whole) and appends a line to STATE_DIR/applied.log; a later call with
the same key changes nothing and answers with the first result. `--fail-first N` fails the first N
calls of each key (of step `--fail-step` only, when given): exit 1, message on stderr. `--block`
stops at step `--block-step`, before or after applying the undo: it writes its pid to the
`--ready` FIFO, then waits on the `--gate` FIFO until the test releases it (or kills it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _append(path: Path, record: dict[str, object]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _block(ready: str, gate: str) -> None:
    with open(ready, "w") as f:
        f.write(f"{os.getpid()}\n")
    with open(gate) as f:  # blocks until the test opens the gate for writing
        f.read()


def _apply(state: Path, key: str, result: dict[str, object]) -> dict[str, object]:
    effects = state / "effects"
    effects.mkdir(exist_ok=True)
    # Written whole under a name of this process's, then linked into place: a call with the same key
    # released at the same moment (two rollback holders let through one gate) finds no effect or a
    # complete one, never one created and not yet written (it failed on an empty answer).
    draft = effects / f".{key}.{os.getpid()}"
    with draft.open("w") as f:
        f.write(json.dumps(result))
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(draft, effects / key)
    except FileExistsError:
        answer: dict[str, object] = json.loads((effects / key).read_text())
        return answer
    finally:
        draft.unlink()
    _append(state / "applied.log", {"key": key, "pid": os.getpid()})
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("state")
    parser.add_argument("--phase", default="")
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--fail-step", type=int, default=-1, help="fail only this step's calls (default: all)")
    parser.add_argument("--block", choices=["before", "after"])
    parser.add_argument("--block-step", type=int, default=-1)
    parser.add_argument("--ready")
    parser.add_argument("--gate")
    opts = parser.parse_args()
    state = Path(opts.state)
    call = json.loads(sys.stdin.read())
    key, step = call["idempotency_key"], call["step"]
    _append(
        state / "calls.log",
        {"key": key, "step": step, "attempt": call.get("attempt"), "phase": opts.phase, "pid": os.getpid()},
    )
    with (state / f"fails-{key}").open("a") as counted:  # a byte per call: two at once never read one count
        counted.write(".")
        count = counted.tell()
    if count <= opts.fail_first and opts.fail_step in (-1, step):
        print(f"downstream said 503 (call {count})", file=sys.stderr)
        return 1
    blocking = opts.block is not None and step == opts.block_step
    if blocking and opts.block == "before":
        _block(opts.ready, opts.gate)
    result = _apply(state, key, {"undone": call["tool"], "key": key[:12]})
    if blocking and opts.block == "after":
        _block(opts.ready, opts.gate)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""External commands as compensators, checks and readers: the call JSON on stdin, never a shell.

A non-zero exit or a timeout fails the attempt; its error is the last line the command wrote to
stderr (or what happened, when it wrote nothing).
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

from reversi.errors import BadInput

DEFAULT_TIMEOUT_S = 30.0


class CommandFailed(Exception):
    """The command exited non-zero, timed out, could not start, or printed something unusable."""


def split_command(cmd: str, what: str) -> list[str]:
    """The command's words, split like a shell would but with no shell running.

    Raises:
        BadInput: the command is empty or badly quoted.
    """
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise BadInput(f"{what}: cannot parse {cmd!r}: {exc}") from exc
    if not argv:
        raise BadInput(f"{what}: the command is empty")
    return argv


async def run_command(argv: list[str], payload: Any, timeout_s: float) -> str:
    """Run `argv` with `payload` as JSON on stdin; return its stdout.

    Raises:
        CommandFailed: as above.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except OSError as exc:
        raise CommandFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise CommandFailed(f"{argv[0]} timed out after {timeout_s:g} s") from None
    if proc.returncode != 0:
        lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
        raise CommandFailed(lines[-1].strip() if lines else f"{argv[0]} exited with status {proc.returncode}")
    return out.decode(errors="replace")


def _json_or_text(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def command_compensator(cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """A `compensate(call)` that runs `cmd`; its stdout, when JSON, is the compensation's result."""
    argv = split_command(cmd, "--compensator-cmd")

    async def compensate(call: dict[str, Any]) -> Any:
        return _json_or_text(await run_command(argv, call, timeout_s))

    return compensate


def command_verify(cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Callable[[dict[str, Any]], Awaitable[bool]]:
    """A `verify(call)` that passes when `cmd` exits 0."""
    argv = split_command(cmd, "--verify-cmd")

    async def verify(call: dict[str, Any]) -> bool:
        await run_command(argv, call, timeout_s)
        return True

    return verify


def command_reader(cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Callable[[str, Any], Awaitable[Any]]:
    """A `verifier(tool, arguments)` that runs `cmd` with `{"tool","arguments"}` and parses its JSON answer."""
    argv = split_command(cmd, "--reader-cmd")

    async def read(tool: str, arguments: Any) -> Any:
        out = await run_command(argv, {"tool": tool, "arguments": arguments}, timeout_s)
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            raise CommandFailed(f"{argv[0]} printed something that is not JSON") from None

    return read

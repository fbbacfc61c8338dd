"""External commands as compensators, checks and readers: the call JSON on stdin, never a shell.

A non-zero exit or a timeout fails the attempt; its error is the last line the command wrote to
stderr (or what happened, when it wrote nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from reversi.core.json_values import parse_json
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


MAX_OUTPUT_BYTES = 1 << 20  # each of stdout and stderr; more fails the attempt
MAX_ERROR_CHARS = 1000  # the stderr line that becomes the attempt's error (printed and journaled)
_CHUNK = 64 * 1024
_STOP_S = 5.0


class _OutputTooLarge(Exception):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.stream = stream


async def _read_capped(stream: asyncio.StreamReader | None, name: str) -> bytes:
    """All of `stream`, read a chunk at a time; _OutputTooLarge as soon as it passes the cap."""
    assert stream is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > MAX_OUTPUT_BYTES:
            raise _OutputTooLarge(name)
        chunks.append(chunk)
    return b"".join(chunks)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):  # the command did not read all of its stdin: its affair
        pass


async def _exchange(proc: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
    """Write `data` to the command and read both of its outputs to the end, side by side."""
    feeding = asyncio.ensure_future(_feed(proc, data))
    out = asyncio.ensure_future(_read_capped(proc.stdout, "stdout"))
    err = asyncio.ensure_future(_read_capped(proc.stderr, "stderr"))
    try:
        await asyncio.gather(feeding, out, err)
    finally:
        for task in (feeding, out, err):
            task.cancel()
    await proc.wait()
    return out.result(), err.result()


async def _drain(stream: asyncio.StreamReader | None) -> None:
    assert stream is not None
    while await stream.read(_CHUNK):
        pass


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command and everything it started (its own process group, made by start_new_session).

    Then read its pipes to the end: asyncio's `wait()` also waits for them to close, and a pipe left
    unread once its buffer is full is never seen to close. A child that left the group and still
    holds a pipe is given `_STOP_S`, then left to the event loop.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.stdin is not None
    proc.stdin.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_STOP_S):
            await asyncio.gather(_drain(proc.stdout), _drain(proc.stderr))
            await proc.wait()


def _last_line(err: bytes) -> str | None:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1].strip()
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS] + "…"


async def run_command(argv: list[str], payload: Any, timeout_s: float) -> str:
    """Run `argv` with `payload` as JSON on stdin; return its stdout.

    The command runs in a process group of its own: a timeout, or output over the cap, kills the
    whole group, so a command that started children of its own (`sh -c 'sleep 20'`) cannot outlive
    its attempt.

    Raises:
        CommandFailed: as above, or it wrote more than MAX_OUTPUT_BYTES to stdout or stderr.
    """
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    ))
    try:
        proc = await asyncio.shield(starting)
    except OSError as exc:
        raise CommandFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    except asyncio.CancelledError:  # cancelled while it was being started: it may be running already
        with contextlib.suppress(Exception):
            await _stop(await starting)
        raise
    finished = False
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await _exchange(proc, json.dumps(payload).encode())
        finished = True
    except TimeoutError:
        raise CommandFailed(f"{argv[0]} timed out after {timeout_s:g} s") from None
    except _OutputTooLarge as exc:
        raise CommandFailed(f"{argv[0]}: output over {MAX_OUTPUT_BYTES >> 20} MiB on {exc.stream}") from None
    finally:
        if not finished:  # timed out, too much output, or cancelled: nothing it started may stay behind
            await _stop(proc)
    if proc.returncode != 0:
        raise CommandFailed(_last_line(err) or f"{argv[0]} exited with status {proc.returncode}")
    return out.decode(errors="replace")


def _json_or_text(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return parse_json(text, "the output")
    except BadInput:
        return text


def command_compensator(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the compensator command"
) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """A `compensate(call)` that runs `cmd` (`what` names it in errors); its stdout, when JSON, is the
    compensation's result."""
    argv = split_command(cmd, what)

    async def compensate(call: dict[str, Any]) -> Any:
        return _json_or_text(await run_command(argv, call, timeout_s))

    return compensate


def command_verify(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the verify command"
) -> Callable[[dict[str, Any]], Awaitable[bool]]:
    """A `verify(call)` that passes when `cmd` exits 0."""
    argv = split_command(cmd, what)

    async def verify(call: dict[str, Any]) -> bool:
        await run_command(argv, call, timeout_s)
        return True

    return verify


def command_reader(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the reader command"
) -> Callable[[str, Any], Awaitable[Any]]:
    """A `verifier(tool, arguments)` that runs `cmd` with `{"tool","arguments"}` and parses its JSON answer."""
    argv = split_command(cmd, what)

    async def read(tool: str, arguments: Any) -> Any:
        out = await run_command(argv, {"tool": tool, "arguments": arguments}, timeout_s)
        try:
            return parse_json(out, "the output")
        except BadInput as exc:
            raise CommandFailed(f"{argv[0]} printed something that is not JSON ({exc.message})") from None

    return read

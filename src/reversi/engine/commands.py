"""External commands as compensators, checks and readers: the call JSON on stdin, never a shell.

A non-zero exit or a timeout fails the attempt; its error is the last line the command wrote to
stderr (or what happened, when it wrote nothing).

A command runs in a session of its own (so a process group of its own), its output on pipes this
process made itself, so that it knows them when it has to find who still holds them. Stopping it kills
the group; then, on Linux, every process still holding one of its output pipes (a child that left the
group with `setsid` and kept stdout open); then closes this side of the pipes rather than waiting for
their end, so that a holder that could not be killed keeps no one waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from reversi.core.calls import current_call
from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, LooseJSONObject, parse_json
from reversi.errors import BadInput, CommandFailed

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_ERROR_CHARS",
    "MAX_OUTPUT_BYTES",
    "CommandFailed",
    "command_check_undo",
    "command_compensator",
    "command_read_back",
    "run_command",
    "split_command",
]

DEFAULT_TIMEOUT_S = 30.0


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
    """The command wrote more than MAX_OUTPUT_BYTES to `stream` (`"stdout"` or `"stderr"`)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.stream = stream


@dataclass
class _Output:
    name: str
    reader: asyncio.StreamReader
    transport: asyncio.ReadTransport
    inode: int


@dataclass
class _Command:
    """A started command: `exchange` its input for its outputs, `stop` it and all it started."""

    proc: asyncio.subprocess.Process
    outputs: tuple[_Output, _Output]

    @classmethod
    async def start(cls, argv: list[str]) -> _Command:
        """Start `argv` in a session of its own, stdin, stdout and stderr piped.

        Raises:
            OSError: it cannot be started.
        """
        loop = asyncio.get_running_loop()
        pipes = [os.pipe(), os.pipe()]  # not inheritable: only the command gets their write ends
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=pipes[0][1], stderr=pipes[1][1], start_new_session=True)
        except BaseException:
            for read, _ in pipes:
                os.close(read)
            raise
        finally:
            for _, write in pipes:
                os.close(write)
        return cls(proc, (await _connect(loop, "stdout", pipes[0][0]), await _connect(loop, "stderr", pipes[1][0])))

    async def exchange(self, data: bytes) -> tuple[bytes, bytes]:
        """Write `data` to the command and read both of its outputs to the end, side by side; then wait
        for it to exit.

        Raises:
            _OutputTooLarge: an output passed MAX_OUTPUT_BYTES.
        """
        feeding = asyncio.ensure_future(_feed(self.proc, data))
        out, err = (asyncio.ensure_future(_read_capped(output)) for output in self.outputs)
        try:
            await asyncio.gather(feeding, out, err)
        finally:
            for task in (feeding, out, err):
                task.cancel()
        await self.proc.wait()
        for output in self.outputs:
            output.transport.close()
        return out.result(), err.result()

    async def stop(self) -> None:
        """SIGKILL the command's process group, then every process still holding its output pipes
        (Linux), then close them; wait (at most `_STOP_S`) for the command to be reaped."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await asyncio.to_thread(_kill_holders, {output.inode for output in self.outputs})
        for output in self.outputs:
            output.transport.close()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_STOP_S):
                await self.proc.wait()


async def _connect(loop: asyncio.AbstractEventLoop, name: str, fd: int) -> _Output:
    """A stream reader over the read end `fd` of an output pipe."""
    reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
    file = os.fdopen(fd, "rb", buffering=0)
    inode = os.fstat(fd).st_ino
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), file)
    return _Output(name, reader, transport, inode)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):  # the command did not read all of its stdin: its affair
        pass


async def _read_capped(output: _Output) -> bytes:
    """All of an output, read a chunk at a time; OutputTooLarge as soon as it passes the cap."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await output.reader.read(_CHUNK):
        size += len(chunk)
        if size > MAX_OUTPUT_BYTES:
            raise _OutputTooLarge(output.name)
        chunks.append(chunk)
    return b"".join(chunks)


def _kill_holders(inodes: set[int]) -> None:
    """SIGKILL every process that holds the write end of one of the pipes `inodes`: only the command,
    or what it started, can have been given one. Where /proc cannot be read, nothing."""
    links = {f"pipe:[{inode}]" for inode in inodes}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        if _holds(pid, links):
            _kill(pid, links)


def _holds(pid: int, links: set[str]) -> bool:
    """Whether process `pid` has one of the pipes `links` open for writing."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or another user's
        return False
    for fd in fds:
        with contextlib.suppress(OSError, ValueError, IndexError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in links:
                flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:", 1)[1].split()[0]
                if int(flags, 8) & os.O_ACCMODE != os.O_RDONLY:
                    return True
    return False


def _kill(pid: int, links: set[str]) -> None:
    """SIGKILL `pid` through a pidfd, after checking again that it holds a pipe: a number reused by
    another process in between is not killed."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if _holds(pid, links):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def _last_line(err: bytes) -> str | None:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1].strip()
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS] + "…"


async def run_command(argv: list[str], payload: JSONView, timeout_s: float) -> str:
    """Run `argv` with `payload` as JSON on stdin; return its stdout.

    The command runs in a session of its own: a timeout, output over the cap, or a cancellation kills
    it with everything it started, even a child that left its process group and kept its output open
    (`_Command.stop`), and nothing waits on such a child past that.

    Raises:
        CommandFailed: as above, or it wrote more than MAX_OUTPUT_BYTES to stdout or stderr.
    """
    starting = asyncio.ensure_future(_Command.start(argv))
    try:
        command = await asyncio.shield(starting)
    except OSError as exc:
        raise CommandFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    except asyncio.CancelledError:  # cancelled while it was being started: it may be running already
        with contextlib.suppress(Exception):
            await (await starting).stop()
        raise
    finished = False
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await command.exchange(json.dumps(payload).encode())
        finished = True
    except TimeoutError:
        raise CommandFailed(f"{argv[0]} timed out after {timeout_s:g} s") from None
    except _OutputTooLarge as exc:
        raise CommandFailed(f"{argv[0]}: output over {MAX_OUTPUT_BYTES >> 20} MiB on {exc.stream}") from None
    finally:
        if not finished:  # timed out, too much output, or cancelled: nothing it started may stay behind
            await command.stop()
    if command.proc.returncode != 0:
        raise CommandFailed(_last_line(err) or f"{argv[0]} exited with status {command.proc.returncode}")
    return out.decode(errors="replace")


def _json_or_text(text: str) -> LooseJSON:
    text = text.strip()
    if not text:
        return None
    try:
        return parse_json(text, "the output")
    except BadInput:
        return text


def command_compensator(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the compensator command"
) -> Callable[[LooseJSONObject], Awaitable[LooseJSON]]:
    """A `compensate(call)` that runs `cmd` (`what` names it in errors); its stdout, when JSON, is the
    compensation's result."""
    argv = split_command(cmd, what)

    async def compensate(call: JSONObjectView) -> LooseJSON:
        return _json_or_text(await run_command(argv, call, timeout_s))

    return compensate


def command_check_undo(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the verify command"
) -> Callable[[LooseJSONObject], Awaitable[bool]]:
    """A check that the undo took effect (the SDK's `verify(call)`): it passes when `cmd` exits 0."""
    argv = split_command(cmd, what)

    async def check_undo(call: JSONObjectView) -> bool:
        await run_command(argv, call, timeout_s)
        return True

    return check_undo


def command_read_back(
    cmd: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, what: str = "the reader command"
) -> Callable[[str, JSONView], Awaitable[LooseJSON]]:
    """A read-back (the SDK's `verifier(tool, arguments)`; captures and probes read with it too) that
    runs `cmd` with `{"tool","arguments"}` and parses its JSON answer;
    with `"call": {"run_id", "step"}` too when the read is made for a step (a probe)."""
    argv = split_command(cmd, what)

    async def read(tool: str, arguments: JSONView) -> LooseJSON:
        call = current_call()
        made_for = {"call": call.to_dict()} if call is not None else {}
        out = await run_command(argv, {"tool": tool, "arguments": arguments} | made_for, timeout_s)
        try:
            return parse_json(out, "the output")
        except BadInput as exc:
            raise CommandFailed(f"{argv[0]} printed something that is not JSON ({exc.message})") from None

    return read

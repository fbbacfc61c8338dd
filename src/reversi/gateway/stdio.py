"""The agent's stdio, read and written on the event loop.

The SDK's `stdio_server()` reads and writes through worker threads, a thread hop per line; a
proxy pays it twice per call. When stdin and stdout are pipes (as an MCP client launches us) we
hand the SDK async line streams over the same descriptors instead. Either way, while serving,
fd 0 reads /dev/null and fd 1 points at stderr, so nothing stray can corrupt the wire.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.stdio import stdio_server

_LINE_LIMIT = 64 * 1024 * 1024


_TOO_LARGE = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
    "code": -32700, "message": f"Parse error: a message longer than {_LINE_LIMIT >> 20} MiB"}}) + "\n"


class _Lines:
    """The agent's messages, a line each. A line over the limit is answered with a parse error and
    dropped (the SDK would end the whole connection on it)."""

    def __init__(self, reader: asyncio.StreamReader, out: _Out) -> None:
        self._reader, self._out = reader, out
        self._drop_next = False  # the tail of a line that was too long is still to come

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError as exc:  # asyncio's limit: the buffer up to here is gone
                if not self._drop_next:  # the message's first chunk: answer it once
                    await self._out.write(_TOO_LARGE)
                    await self._out.flush()
                self._drop_next = "not found" in str(exc)
                continue
            if not line:
                raise StopAsyncIteration
            if self._drop_next:
                self._drop_next = False
                continue
            return line.decode("utf-8", errors="replace")


class _Out:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def agent_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams of the agent's connection on stdin and stdout."""
    if not (_is_pipe(0) and _is_pipe(1)):
        async with stdio_server() as streams:
            yield streams
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        out = _Out(writer)
        async with stdio_server(_Lines(reader, out), out) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        transport.close()

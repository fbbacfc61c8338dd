"""A stdio upstream's stderr, passed on to the gateway's own, its last line remembered.

The last line is how a start that failed says why (`SHOP_TOKEN is not set`, a traceback's last
line). Until the gateway has decided whether it can serve, the lines are held back: when no
upstream starts, the gateway's one error line already carries the one that matters.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from typing import TextIO

import anyio

from reversi.core.printable import for_terminal

_HELD_LINES = 200  # a server that chats a lot while it starts keeps only its last ones
_LINE_LIMIT = 64 * 1024  # a longer run without a newline counts as a line
_SHOWN = 500  # characters of a line quoted in an error


class StderrRelay:
    """A pipe every process of one upstream writes its stderr to, read for as long as the gateway runs.

    The gateway keeps the pipe's write side open, so the reader never sees an end of file, and
    each restart of the upstream gets the same pipe.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        self.file = os.fdopen(write, "w")  # given to each process as its stderr
        self._out = out or sys.stderr
        self._closed = False
        self._partial = b""
        self._last: str | None = None
        self._held: deque[str] | None = deque(maxlen=_HELD_LINES)

    def last_line(self) -> str | None:
        """The last line with something on it written since `forget`, everything written so far read."""
        self._drain()
        partial = self._partial.decode(errors="replace").strip()
        return partial[:_SHOWN] if partial else self._last

    def forget(self) -> None:
        """Start anew for `last_line` (a new process is about to start)."""
        self._drain()
        self._last = None

    def release(self) -> None:
        """Pass on the lines held back so far, and every line from now on as it comes."""
        held, self._held = self._held, None
        for line in held or ():
            self._show(line)

    async def run(self) -> None:
        """Read the pipe until cancelled, then close it."""
        try:
            while True:
                await anyio.wait_readable(self._read)
                self._drain()
        finally:
            self._closed = True
            os.close(self._read)
            self.file.close()

    def _drain(self) -> None:
        while not self._closed:
            try:
                chunk = os.read(self._read, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            if len(self._partial) > _LINE_LIMIT:
                lines.append(self._partial)
                self._partial = b""
            for raw in lines:
                self._take(raw.decode(errors="replace").rstrip())

    def _take(self, line: str) -> None:
        if line.strip():
            self._last = line.strip()[:_SHOWN]
        if self._held is not None:
            self._held.append(line)
        else:
            self._show(line)

    def _show(self, line: str) -> None:
        print(for_terminal(line), file=self._out, flush=True)  # an upstream's words, escaped

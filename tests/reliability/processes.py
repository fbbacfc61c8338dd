"""A long-lived process under test (`reversi-server`, `reversi-gateway --http`) that says on stderr where
it listens; its stderr is kept in a log file."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
import time
from pathlib import Path

WAIT_S = 60.0


class NotStarted(Exception):
    """The process ended, or said nothing usable, before it listened."""


class Listening:
    """`argv` started with `env` added; `url` is what its stderr line matching `pattern` names (group 1)."""

    def __init__(self, argv: list[str], env: dict[str, str], pattern: str, log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        said: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=WAIT_S)
            except queue.Empty:
                self.stop()
                raise NotStarted(f"{argv[0]} said nothing for {WAIT_S:g} s: {said}") from None
            if line is None:
                raise NotStarted(f"{argv[0]} ended (exit {self.proc.wait(WAIT_S)}) before listening: {said}")
            said.append(line)
            found = re.search(pattern, line)
            if found:
                self.url = found.group(1)
                return

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        with self.log.open("a") as out:
            for line in self.proc.stderr:
                out.write(f"{time.time():.3f} {line}")
                out.flush()
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def stop(self) -> None:
        """SIGTERM, then wait (SIGKILL if it will not end)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(WAIT_S)

"""Servers for the HTTP tests: the app under uvicorn in a thread on a loopback port, or `reversi-server`
in a subprocess; keys of every role; clients that carry them.

`db_url` (both back ends) and `manifest` come from the suite's conftest.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from tests.conftest import WAIT_S as WAIT_S
from tests.conftest import wait_for as wait_for

import reversi
from reversi.engine.keys import create_key
from reversi.server import create_app

T = TypeVar("T")
COMPENSATOR = Path(__file__).parent.parent / "engine" / "compensator.py"
SERVER = Path(sys.executable).parent / "reversi-server"




class ThreadServer:
    """The app served by uvicorn in a thread of this process, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                                    lifespan="on", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), "the server to start")
        assert self.server.started, "the server did not start"
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)


@dataclass
class Site:
    """A running server, its ledger, and keys by role name (`agent`, `operator`, `admin`, ...)."""

    url: str
    ledger: reversi.Ledger
    keys: dict[str, str] = field(default_factory=dict)
    clients: list[httpx.Client] = field(default_factory=list)

    def add_key(self, label: str, role: str, tenant: str | None = None, name: str | None = None) -> str:
        _, key = create_key(self.ledger.store, name or label, role, tenant)
        self.keys[label] = key
        return key

    def client(self, who: str | None = None) -> httpx.Client:
        """A client with the key labelled `who` (no key when None)."""
        headers = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=WAIT_S)
        self.clients.append(client)
        return client


@pytest.fixture
def kill_file(tmp_path: Path) -> Path:
    return tmp_path / "kill"


@pytest.fixture
def make_site(db_url: str, manifest: Path, kill_file: Path, monkeypatch: pytest.MonkeyPatch
              ) -> Iterator[Callable[..., Site]]:
    """Start a server over `db_url` (kill file configured, absent); options go to `create_app`."""
    monkeypatch.setenv("REVERSI_KILL_FILE", str(kill_file))
    opened: list[tuple[ThreadServer, Site]] = []

    def start(**options: Any) -> Site:
        ledger = reversi.open(db_url, manifests=[str(manifest)])
        options.setdefault("compensator_cmd", None)
        server = ThreadServer(create_app(ledger, **options))
        site = Site(server.url, ledger)
        opened.append((server, site))
        return site

    yield start
    for server, site in opened:
        for client in site.clients:
            client.close()
        server.stop()
        site.ledger.close()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    """A server with keys: `agent` and `agent2` (tenant acme), `outsider` (agent, tenant other),
    `operator` (all tenants), `acme-operator`, `other-operator` and `admin`."""
    s = make_site()
    s.add_key("agent", "agent", "acme")
    s.add_key("agent2", "agent", "acme")
    s.add_key("outsider", "agent", "other")
    s.add_key("operator", "operator")
    s.add_key("acme-operator", "operator", "acme")
    s.add_key("other-operator", "operator", "other")
    s.add_key("admin", "admin")
    return s


def compensator_cmd(state: Path, *extra: str) -> str:
    return " ".join([sys.executable, str(COMPENSATOR), str(state), *extra])


class LoggedProcess:
    """A subprocess whose stderr is kept in `log` and read line by line (`expect`, `search`)."""

    def __init__(self, name: str, proc: subprocess.Popen[str], log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        with self.log.open("a") as out:
            for line in self.proc.stderr:
                out.write(line)
                out.flush()
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _next(self, matches: Callable[[str], T | None], what: str, timeout: float) -> T:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"{self.name} did not say {what} in {timeout:g} s; it said {self.said}")
            if line is None:
                pytest.fail(f"{self.name} ended before saying {what}; it said {self.said}")
            self.said.append(line)
            found = matches(line)
            if found is not None:
                return found

    def expect(self, prefix: str, timeout: float = WAIT_S) -> str:
        """The next line that starts with `prefix`."""
        return self._next(lambda line: line if line.startswith(prefix) else None, repr(prefix), timeout)

    def search(self, pattern: str, timeout: float = WAIT_S) -> re.Match[str]:
        """The match in the next line where the regular expression `pattern` is found."""
        return self._next(re.compile(pattern).search, f"/{pattern}/", timeout)

    def signal(self, signum: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(WAIT_S)


class ServerProcess(LoggedProcess):
    """`reversi-server` in a subprocess."""

    def __init__(self, db_url: str, env: dict[str, str], log: Path) -> None:
        proc = subprocess.Popen(
            [str(SERVER), "--port", "0", "--db", db_url, "--log-level", "info"],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        super().__init__("the server", proc, log)
        line = self.expect("reversi-server: listening on ")
        self.url = line.split("listening on ", 1)[1].strip()


@pytest.fixture
def spawn_server(db_url: str, tmp_path: Path) -> Iterator[Callable[[dict[str, str]], ServerProcess]]:
    """Start `reversi-server` subprocesses on `db_url`; every one still running is killed at the end."""
    started: list[ServerProcess] = []
    assert shutil.which(str(SERVER)), f"{SERVER} is not installed"

    def start(env: dict[str, str]) -> ServerProcess:
        server = ServerProcess(db_url, env, tmp_path / f"server-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.signal(signal.SIGKILL)

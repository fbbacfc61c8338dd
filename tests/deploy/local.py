"""deploy/compose.yaml's services run as local processes, with no container: the commands it names, with
its environment, on this machine.

What a container would provide is given here instead: each volume is a directory (a bind mount its
source folder, a named volume a folder of the test's), and every container path in a command, an
environment value or a health check is replaced by that directory; the store is the test's PostgreSQL
schema instead of the `postgres` service; a service listens on 127.0.0.1 and port 0 (the port it says
it got replaces its container port in its health check), since several run on one machine; and the
programs come from this interpreter's environment.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from tests.server.conftest import WAIT_S, LoggedProcess

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
# What each kind of service says once it listens, with the URL it listens on.
LISTENING = re.compile(r"(?:listening on|serving) (http://[\d.]+:(\d+))")


class Process(LoggedProcess):
    """A service's process; `url` is where it listens."""

    url = ""


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


class LocalHost:
    """Runs the services of deploy/compose.yaml here; `stop` ends every process it started."""

    def __init__(self, workdir: Path, db_url: str) -> None:
        self.workdir = workdir
        self.db_url = db_url
        self.services: dict[str, Any] = compose()["services"]
        self.started: list[Process] = []

    def volume(self, source: str) -> Path:
        """The directory standing for a volume: a bind mount's own folder, else one of the test's."""
        if source.startswith("."):
            return (DEPLOY / source).resolve()
        path = self.workdir / source
        path.mkdir(exist_ok=True)
        return path

    def _paths(self, service: dict[str, Any]) -> list[tuple[str, str]]:
        mounts = []
        for entry in service.get("volumes", []):
            source, target = entry.split(":")[:2]
            mounts.append((target, str(self.volume(source))))
        return sorted(mounts, key=lambda m: -len(m[0]))

    def local(self, service: dict[str, Any], text: str) -> str:
        """`text` with every container path of the service's volumes replaced by its directory."""
        for target, directory in self._paths(service):
            text = text.replace(target, directory)
        return text

    def environment(self, name: str, overrides: dict[str, str | None] | None = None) -> dict[str, str]:
        service = self.services[name]
        env = {k: v for k, v in os.environ.items() if not k.startswith("REVERSI_")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        for key, value in service.get("environment", {}).items():
            env[key] = self.local(service, str(value))
        env["REVERSI_DB"] = self.db_url  # the `postgres` service's place
        for key, value in (overrides or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def command(self, name: str) -> list[str]:
        """The service's command, on loopback and port 0 where it listens."""
        service = self.services[name]
        argv = [self.local(service, str(arg)) for arg in service["command"]]
        if "--port" in argv:
            argv[argv.index("--port") + 1] = "0"
        argv = [re.sub(r"^0\.0\.0\.0:\d+$", "127.0.0.1:0", arg) for arg in argv]
        return ["127.0.0.1" if arg == "0.0.0.0" else arg for arg in argv]

    def run(self, name: str) -> subprocess.CompletedProcess[str]:
        """A one-shot service (`init`), to the end."""
        return subprocess.run(self.command(name), env=self.environment(name), cwd=self.workdir, text=True,
                              capture_output=True, timeout=WAIT_S, check=False)

    def start(self, name: str, label: str | None = None, **overrides: str | None) -> Process:
        """A long-running service, once it says where it listens."""
        label = label or name
        proc = subprocess.Popen(self.command(name), env=self.environment(name, overrides), cwd=self.workdir,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        process = Process(label, proc, self.workdir / f"{label}.log")
        self.started.append(process)
        process.url = process.search(LISTENING.pattern).group(1)
        return process

    def health_check(self, name: str, process: Process) -> subprocess.CompletedProcess[str]:
        """The service's compose health check, run against `process` (its port, not the container's)."""
        service = self.services[name]
        test = list(service["healthcheck"]["test"])
        assert test[0] == "CMD", "a health check runs a command, not a shell"
        port = process.url.rsplit(":", 1)[1]
        argv = [re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", self.local(service, arg)) for arg in test[1:]]
        return subprocess.run(argv, env=self.environment(name), text=True, capture_output=True, timeout=WAIT_S,
                              check=False)

    def stop(self) -> None:
        for process in self.started:
            process.signal(signal.SIGKILL)  # stopped (SIGSTOP) or not

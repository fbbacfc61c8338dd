"""The HTTP examples work as written, with the real CLI, a real `reversi-server` and curl: every command
of docs/http-api.md's console blocks, in order in one folder with the page's manifest and compensator;
and the README's curl block, over the README's manifest.

What the page shows is compared with what the commands print, once times, generated ids, keys and the
port are masked. A response shown with `-i` lists only some headers: those must be there, the status
line and the body must be the same. A GET that shows a job's state is retried until it shows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "http-api.md"
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
WAIT_S = 30.0
DOC_PORT = "8080"
_MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"halt_[0-9a-f-]{36}"), "halt_<id>"),
    (re.compile(r"job_[0-9a-f]{32}"), "job_<id>"),
    (re.compile(r"rvk_[A-Za-z0-9_-]+"), "rvk_<key>"),
    (re.compile(r'"id": "[a-z0-9]{12}"'), '"id": "<id>"'),
]


@pytest.fixture(autouse=True)
def _curl() -> None:
    assert shutil.which("curl"), "these tests run the examples with curl: apt-get install curl"


@dataclass
class Command:
    """One `$ ...` line of a console block and the lines the page shows after it."""

    line: str
    shown: list[str]


def blocks(language: str, page: Path = DOC) -> list[str]:
    return [body for lang, body in re.findall(r"```(\w+)\n(.*?)```", page.read_text(), re.S) if lang == language]


def console_commands() -> list[Command]:
    commands: list[Command] = []
    for block in blocks("console"):
        for text in block.splitlines():
            if text.startswith("$ "):
                commands.append(Command(text[2:], []))
            else:
                commands[-1].shown.append(text)
    return commands


def masked(text: str, port: str) -> str:
    text = text.replace("\r\n", "\n").replace(f"127.0.0.1:{port}", f"127.0.0.1:{DOC_PORT}")
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text.rstrip("\n")


def same_as_shown(shown: list[str], printed: str) -> bool:
    """`printed` says what `shown` says; for `-i`, the shown headers are a subset of those printed."""
    want = "\n".join(shown)
    if not want.startswith("HTTP/1.1 "):
        return printed == want
    want_head, _, want_body = want.partition("\n\n")
    head, _, body = printed.partition("\n\n")
    status, *headers = head.split("\n")
    want_status, *want_headers = want_head.split("\n")
    lowered = {h.lower() for h in headers}
    return (status, body) == (want_status, want_body) and all(h.lower() in lowered for h in want_headers)


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    [manifest] = blocks("yaml")
    [undo] = blocks("sh")
    (tmp_path / "tools.yaml").write_text(manifest)
    (tmp_path / "undo.sh").write_text(undo)
    (tmp_path / "undo.sh").chmod(0o755)
    return tmp_path


@pytest.fixture
def env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


class Server:
    """The page's `reversi-server` line, run in the background; its stderr is read on a thread."""

    def __init__(self, line: str, folder: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "-c", line], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for text in self.proc.stderr:
            self.lines.append(text.rstrip("\n"))

    def wait_for(self, prefix: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = [text for text in self.lines if text.startswith(prefix)]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        pytest.fail(f"reversi-server did not say {prefix!r}; it said: {self.lines}")

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        assert self.proc.wait(WAIT_S) == 0, self.lines


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def run_shown(command: Command, folder: Path, env: dict[str, str], port: str) -> str:
    """Run a command and check it prints what the page shows (a GET is given time for a job to end);
    returns its standard output."""
    line = command.line.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{port}")
    deadline = time.monotonic() + (WAIT_S if line.startswith("curl") and " -X " not in line else 0)
    while True:
        done = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True)
        printed = masked(done.stdout + done.stderr, port)
        if same_as_shown([masked(text, DOC_PORT) for text in command.shown], printed):
            return done.stdout
        if time.monotonic() > deadline:
            shown = "\n".join(command.shown)
            pytest.fail(f"$ {command.line}\nprinted:\n{printed}\nthe page shows:\n{shown}")
        time.sleep(0.1)


def test_every_example_prints_what_the_page_shows(
    folder: Path, env: dict[str, str], servers: list[Server], tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = free_port()
    ran = 0
    for command in console_commands():
        if "--host 0.0.0.0" in command.line:  # needs a store without keys: a folder of its own
            run_shown(command, tmp_path_factory.mktemp("no-keys"), env, port)
        elif "reversi-server" in command.line:
            server = Server(command.line.replace(f"--port {DOC_PORT}", f"--port {port}"), folder, env)
            servers.append(server)
            [shown] = command.shown
            assert masked(server.wait_for(shown.split(" on ")[0]), port) == shown
        else:
            printed = run_shown(command, folder, env, port)
            if command.line.startswith("reversi keys create billing-agent"):  # the page's AGENT
                env["AGENT"] = json.loads(printed)["key"]
        if command.line.endswith("> admin.json"):  # the page's OPERATOR and ADMIN
            env["OPERATOR"] = json.loads((folder / "operator.json").read_text())["key"]
            env["ADMIN"] = json.loads((folder / "admin.json").read_text())["key"]
        ran += 1
    assert ran >= 20, "the page's examples were not all found"


def test_the_readme_records_a_call_over_http(tmp_path: Path, env: dict[str, str], servers: list[Server]) -> None:
    [manifest] = blocks("yaml", README)
    (tmp_path / "tools.yaml").write_text(manifest)
    [block] = [b for b in blocks("bash", README) if "curl" in b]
    start, *lines = [text for text in block.splitlines() if text and not text.startswith("#")]
    port = free_port()
    server = Server(start.removesuffix("&").strip() + f" --port {port}", tmp_path, env)
    servers.append(server)
    server.wait_for("reversi-server: listening on")
    printed = []
    for line in lines:
        line = line.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{port}")
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
        printed.append(json.loads(done.stdout))
    opened, step, outcome, plan = printed
    assert (opened["run_id"], opened["actor"], opened["principal"]) == ("run_http_1", "billing-agent", "local")
    assert step == {"step": 0, "status": "intended"}
    assert (outcome["status"], outcome["result"]) == ("succeeded", {"id": "ch_3"})
    [action] = plan["actions"]
    assert (action["kind"], action["compensation_tool"], action["args"]) == (
        "compensate", "stripe.refund", {"charge_id": "ch_3", "amount": 300})

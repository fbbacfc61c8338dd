"""Fixtures shared by the whole suite: a clean environment, both store back ends, a manifest, a
ledger, and child processes that the tests drive line by line.

Every store test runs twice through `db_url`: on a SQLite file under `tmp_path`, and on a fresh
schema of the PostgreSQL server named by REVERSI_TEST_PG_URL (skipped when it is unset).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

import reversi

# Read before the autouse fixture below clears every REVERSI_* variable.
PG_URL = os.environ.get("REVERSI_TEST_PG_URL")
PG_SKIP = "set REVERSI_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/test to run the PostgreSQL half"

# The longest modules (`--durations` shows them) start first: with two workers, one left at the end would
# run alone while the other idles. The order within each module is kept.
SLOW_FIRST = ("gateway/test_basic_memory.py", "test_packaging.py", "reliability/test_campaign.py", "test_demo.py",
              "deploy/test_topology.py", "integrations/test_in_own_env.py", "integrations/test_claude_agent_sdk.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.split("::")[0].removeprefix("tests/").startswith(SLOW_FIRST))


TESTS = Path(__file__).parent
CHILD = TESTS / "engine" / "child.py"
COMPENSATOR = TESTS / "engine" / "compensator.py"
READER = TESTS / "engine" / "reader.py"
WAIT_S = 30.0


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll `predicate` until it returns something truthy (and return it), failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(0.02)

MANIFEST = """\
version: 1
tools:
  stripe.create_charge:
    compensation:
      tool: stripe.refund
      args: {charge_id: "$result.id", amount: "$args.amount"}
      kind: compensation
      residue: ["the charge still appears on the customer's statement"]
  stripe.get_charge:
    effect: read
  crm.upsert_contact:
    idempotent: true
  email.send:
    irreversible: true
  github.create_repo:
    compensation:
      tool: github.delete_repo
      args: {repo: "$result.full_name"}
      kind: inverse
  github.create_file:
    requires: ["github.create_*"]
    compensation:
      tool: github.delete_file
      args: {repo: "$args.repo", path: "$args.path"}
      kind: inverse
  stripe.create_payment_intent:
    compensation:
      tool: stripe.cancel_payment_intent
      args: {payment_intent: "$result.id"}
      kind: inverse
    verification:
      tool: stripe.get_payment_intent
      args: {id: "$result.id"}
      expect: {status: canceled}
      retries: 2
      backoff_ms: 10
  docs.create:
    compensation:
      tool: docs.delete
      args: {name: "$args.name"}
    verification:
      tool: docs.get
      args: {id: "$result.doc_id"}
      expect: {deleted: true}
  bank.transfer:
    compensation:
      tool: bank.reverse_transfer
      args: {transfer: "$result.id"}
      requires_approval: true
  payments.wire:
    requires_approval: true
    compensation:
      tool: payments.recall_wire
      args: {wire: "$result.id"}
  shop.place_order:
    idempotency:
      key: ["$args.order_id"]
    compensation:
      tool: shop.cancel_order
      args: {order_id: "$args.order_id"}
  jobs.*:
    compensation:
      tool: jobs.cancel
      args: {job: "$result.id"}
"""


@pytest.fixture(autouse=True)
def _clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No REVERSI_* variable of the developer's shell and no reversi.yaml of the project leak in, and
    no test's recording of OpenTelemetry spans outlives it (see tests/otel_spans.py)."""
    for name in list(os.environ):
        if name.startswith("REVERSI_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield
    if "tests.otel_spans" in sys.modules:
        sys.modules["tests.otel_spans"].stop_recording()


def _with_search_path(url: str, schema: str) -> str:
    option = "options=" + quote(f"-csearch_path={schema}", safe="")
    return f"{url}{'&' if '?' in url else '?'}{option}"


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store: a SQLite file, or a schema of its own on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/reversi.db"
        return
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield _with_search_path(PG_URL, schema)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(MANIFEST)
    return path


@pytest.fixture
def ledger(db_url: str, manifest: Path) -> Iterator[reversi.Ledger]:
    with reversi.open(db_url, manifests=[str(manifest)]) as opened:
        yield opened


class Child:
    """A Python child process that talks in lines: the test reads what it says, with a timeout."""

    def __init__(self, argv: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        with stderr_path.open("w") as stderr:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1
            )
        self.said: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self, timeout: float = WAIT_S) -> str | None:
        """The next line the child writes; None once it has ended."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"child {self.pid} said nothing for {timeout:g} s; it said {self.said}{self._stderr()}")
        if line is not None:
            self.said.append(line)
        return line

    def expect(self, prefix: str, timeout: float = WAIT_S) -> str:
        """Read lines until one starts with `prefix`; fail if the child ends first."""
        while True:
            line = self.line(timeout)
            if line is None:
                self.proc.wait(timeout)
                pytest.fail(f"child ended (exit {self.proc.returncode}) before saying {prefix!r}{self._stderr()}")
            if line.startswith(prefix):
                return line

    def send(self, text: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = WAIT_S) -> int:
        """Close its stdin and wait for it to end; returns the exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean anything up."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT_S)

    def _stderr(self) -> str:
        text = self.stderr_path.read_text() if self.stderr_path.exists() else ""
        return f"\n--- stderr ---\n{text}" if text else ""


@pytest.fixture
def spawn(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Child]]:
    """Start `tests/engine/child.py SCENARIO CONFIG` (config as JSON); every child is killed at the end.

    It depends on `db_url` so that children are gone before the test's schema is dropped.
    """
    children: list[Child] = []
    counter = iter(range(1_000_000))

    def start(scenario: str, **config: object) -> Child:
        config.setdefault("db", db_url)
        argv = [sys.executable, str(CHILD), scenario, json.dumps(config)]
        child = Child(argv, tmp_path / f"child-{next(counter)}.stderr")
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()

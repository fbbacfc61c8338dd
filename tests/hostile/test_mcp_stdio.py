"""Hostile bytes on the gateway's stdin: after each message the gateway still answers a plain call,
everything it writes to stdout is JSON-RPC, it never prints a traceback, and the upstream got no
call that was not journaled first."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.gateway.conftest import GATEWAY, WAIT_S
from tests.gateway.http_wire import ENVELOPE
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.mcp_messages import MESSAGES, deep, gateway_flags, journal_problems

RUN_ID = "run_fuzz_stdio"
INTERNAL_ERROR = -32603  # what an MCP server answers when a handler raised: the 500 of JSON-RPC


class StdioGateway:
    """`reversi-gateway` on stdio, written raw bytes and read line by line."""

    def __init__(self, tmp_path: Path) -> None:
        self.shop, self.db, flags = gateway_flags(tmp_path)
        self.stderr = tmp_path / "gateway.stderr"
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen([str(GATEWAY), *flags, "--run-id", RUN_ID], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def probe(self) -> list[Any]:
        """Make a plain call and wait for its answer; returns every message written before it."""
        probe_id = f"probe-{uuid.uuid4().hex}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "tools/call",
                              "params": {"name": "echo", "arguments": {"text": probe_id}, "_meta": ENVELOPE}}).encode())
        said: list[Any] = []
        while True:
            try:
                line = self.lines.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"the gateway did not answer a plain call in {WAIT_S:g} s after: {said}")
            if line is None:
                pytest.fail(f"the gateway ended (exit {self.proc.wait(WAIT_S)}): {self.stderr.read_text()[-2000:]}")
            message = json.loads(line)  # anything but JSON on stdout fails here
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
            assert (message.get("error") or {}).get("code") != INTERNAL_ERROR, message
            if message.get("id") == probe_id:
                assert message["result"]["content"][0]["text"] == probe_id, message
                return said
            said.append(message)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(WAIT_S)


@pytest.fixture
def stdio_gateway(tmp_path: Path) -> Iterator[StdioGateway]:
    gateway = StdioGateway(tmp_path)
    gateway.probe()  # started, and its upstream too
    try:
        yield gateway
    finally:
        if gateway.proc.poll() is None:
            gateway.proc.kill()
            gateway.proc.wait(WAIT_S)


def finish(gateway: StdioGateway) -> None:
    assert gateway.close() == 0
    assert "Traceback" not in gateway.stderr.read_text(errors="replace")
    assert journal_problems(gateway.shop, gateway.db) == []


NAMED = [deep(200_000), b"x" * (8 << 20), b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
         b'"echo", "arguments": {"text": NaN}}}', b"\xff\xfe\x00\x00", b"[]", b"{}", b'"' * 1000, b"\x1b[2J",
         json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
             "name": "echo", "arguments": {"text": "x"}, "_meta": {**ENVELOPE, "reversi/idempotency_key": "forged"}}}
                    ).encode()]


def test_named_hostile_messages_leave_the_gateway_serving(stdio_gateway: StdioGateway) -> None:
    for line in NAMED:
        stdio_gateway.send(line)
        stdio_gateway.probe()
    tried("mcp-stdio", len(NAMED))
    assert [c["meta"] for c in stdio_gateway.shop.calls() if c["arguments"] == {"text": "x"}] == [{}]
    finish(stdio_gateway)


@fuzz_settings(ci=40)
@given(messages=st.lists(MESSAGES, min_size=1, max_size=6))
def test_generated_messages_leave_the_gateway_serving_and_forward_nothing_unjournaled(
    stdio_gateway: StdioGateway, messages: list[bytes]
) -> None:
    for line in messages:
        stdio_gateway.send(line)
    stdio_gateway.probe()
    tried("mcp-stdio", len(messages))
    assert journal_problems(stdio_gateway.shop, stdio_gateway.db) == []

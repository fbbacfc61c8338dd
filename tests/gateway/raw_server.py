"""A 2025-11-25 MCP server written without any SDK, on stdio: it answers exactly the JSON below, so a
test can see what reaches an agent byte for byte (a vendor's own top-level field, its `_meta`)."""

from __future__ import annotations

import json
import sys
from typing import Any

VENDOR_RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": '{"ok": true}'}],
    "vendorField": {"kept": [1, 2]},
    "_meta": {"vendor/trace": "t-9"},
}
TOOLS = [
    {"name": "vendor", "inputSchema": {"type": "object"}, "x-vendor": "listed as sent"},
    {"name": "params", "inputSchema": {"type": "object"}},
]


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1.0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "vendor":
        return VENDOR_RESULT
    if method == "tools/call" and params.get("name") == "params":  # what it was sent
        return {"content": [{"type": "text", "text": json.dumps(params, sort_keys=True)}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": f"no tool {params.get('name')}"}], "isError": True}
    if method == "ping":
        return {}
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            reply["result"] = answer(message["method"], message.get("params") or {})
        except LookupError:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

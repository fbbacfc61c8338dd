"""A command that writes down how it was run: its arguments and its stdin, as one JSON line appended
to the file named by RECORD_TO; then it answers `{"ok": true}` (a compensator's or reader's answer).
With RECORD_ARGV_ONLY set it reads no stdin and exits 1 (an upstream that cannot start).

The security tests pass data full of shell metacharacters through it: if a shell ever ran in between,
the arguments would not arrive as written, and the files the metacharacters name would exist.
"""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":
    argv_only = "RECORD_ARGV_ONLY" in os.environ  # as an MCP upstream: stdin stays open, so do not wait for it
    with open(os.environ["RECORD_TO"], "a") as out:
        out.write(json.dumps({"argv": sys.argv[1:], "stdin": None if argv_only else sys.stdin.read()}) + "\n")
    if argv_only:
        sys.exit(1)
    print(json.dumps({"ok": True}))

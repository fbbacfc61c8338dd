"""A stand-in read-only tool for `command_read_back`.

Usage: reader.py ANSWERS_JSON LOG
ANSWERS_JSON maps a tool name to the JSON answer to print; each request ({"tool","arguments"} on
stdin) is appended to LOG. An unknown tool exits 1 with a message on stderr. An answer
`{"applied": PATH, "then": A, "else": B}` reads the world `compensator.py` keeps: A once the undo
whose effect file is PATH was applied, else B.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

answers = json.loads(Path(sys.argv[1]).read_text())
request = json.loads(sys.stdin.read())
with open(sys.argv[2], "a") as log:
    log.write(json.dumps(request, sort_keys=True) + "\n")
if request["tool"] not in answers:
    print(f"no such tool {request['tool']}", file=sys.stderr)
    sys.exit(1)
answer = answers[request["tool"]]
if isinstance(answer, dict) and "applied" in answer:
    answer = answer["then"] if Path(answer["applied"]).exists() else answer["else"]
print(json.dumps(answer))

"""`reversi-connectors compensate`, except that after the compensation of step CRASH_STEP has taken
effect it kills the rollback that ran it (SIGKILL, before the rollback can journal the outcome), once:
the marker file CRASH_MARKER says it already did."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

call = sys.stdin.read()
done = subprocess.run([sys.argv[1], "compensate"], input=call, capture_output=True, text=True)
marker = Path(os.environ["CRASH_MARKER"])
if done.returncode == 0 and json.loads(call)["step"] == int(os.environ["CRASH_STEP"]) and not marker.exists():
    marker.write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)

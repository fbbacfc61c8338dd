"""The recording process of the campaign's `sdk` target: an agent that makes its calls with `run.call`.

    python sdk_child.py CONFIG_JSON

Each call's function is the witness's forward call (a `timeout` call raises TimeoutError after the
effect, as a client that gave up would). After `run.call` returns or raises, the outcome it journaled
is acknowledged in acks.jsonl (fsynced): the checker holds the journal to it after the kill.

With CAMPAIGN_SABOTAGE=call-first in its environment it plays a broken recorder that calls first and
journals after, to show that the campaign catches one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.reliability.witness_client import WitnessClient, WitnessError
from tests.reliability.world import append_line

import reversi


def main() -> None:
    config = json.loads(sys.argv[1])
    witness = WitnessClient(config["socket"])
    acks = Path(config["acks"])
    with reversi.open(config["db"], manifests=[config["manifest"]]) as ledger:
        run = ledger.start_run(config["run_id"], actor="campaign")
        for call in config["calls"]:
            tool, args = call["tool"], call["args"]

            def effect(tool: str = tool, timeout: bool = call["timeout"], **args: Any) -> Any:
                result = witness.forward(tool, args)
                if timeout:
                    raise TimeoutError(f"{tool} did not answer in time")
                return result

            try:
                if os.environ.get("CAMPAIGN_SABOTAGE") == "call-first":
                    result = effect(**args)
                    run.begin(tool, args, call["depends_on"]).succeeded(result)
                else:
                    run.call(tool, args, effect, depends_on=call["depends_on"])
                said = "succeeded"
            except TimeoutError:
                said = "uncertain"
            except WitnessError:
                said = "failed"
            append_line(acks, {"by": "run.call", "run_id": run.id, "op": args["op"], "type": said})


if __name__ == "__main__":
    main()

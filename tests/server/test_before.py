"""Over HTTP the caller makes the capture itself: `POST /steps` takes what it read as `before`, and
the plan resolves `$before` from it; a step recorded without it says nothing was captured."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.server.conftest import Site

MANIFEST = """\
version: 1
tools:
  kg.delete_entities:
    capture: {tool: kg.open_nodes, args: {names: "$args.entityNames"}}
    compensation: {tool: kg.create_entities, args: {entities: "$before.entities"}}
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "kg.yaml"
    path.write_text(MANIFEST)
    return path


def test_a_step_recorded_with_what_was_read_before_it_plans_its_undo_from_that(site: Site) -> None:
    agent = site.client("agent")
    run_id = agent.post("/v1/runs", json={}).json()["run_id"]
    ada = {"name": "ada", "entityType": "person", "observations": ["counts"]}
    for body in ({"tool": "kg.delete_entities", "args": {"entityNames": ["ada"]}, "before": {"entities": [ada]}},
                 {"tool": "kg.delete_entities", "args": {"entityNames": ["bob"]}}):
        begun = agent.post(f"/v1/runs/{run_id}/steps", json=body)
        assert begun.status_code == 201, begun.text
        agent.post(f"/v1/runs/{run_id}/steps/{begun.json()['step']}/outcome", json={"status": "succeeded"})
    actions = agent.get(f"/v1/runs/{run_id}/plan").json()["actions"]
    assert actions[1]["args"] == {"entities": [ada]}
    assert actions[0]["reason"] == ("compensation arguments unavailable: $before.entities "
                                    "(nothing was captured before the call)")
    intended = [e for e in agent.get(f"/v1/runs/{run_id}/events").json()["items"] if e["type"] == "intended"]
    assert intended[0]["data"]["before"] == {"entities": [ada]} and "before" not in intended[1]["data"]

"""The OpenAPI document describes what the server does: every route is in it, and schemathesis,
generating requests from it, gets no 5xx and no answer that breaks it (a short run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import reversi
from reversi.engine.keys import create_key
from reversi.engine.run import run_coroutine
from reversi.server import create_app
from reversi.server.api import ENDPOINTS
from reversi.server.openapi import LINKS, openapi_document

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_the_document_lists_every_route_with_its_method() -> None:
    paths = openapi_document(ENDPOINTS)["paths"]
    for ep in ENDPOINTS:
        assert ep.method.lower() in paths[ep.path], ep.path
    documented = {(path, method) for path, ops in paths.items() for method in ops}
    assert documented == {(ep.path, ep.method.lower()) for ep in ENDPOINTS} | {("/healthz", "get"), ("/metrics", "get")}


@pytest.fixture
def served(tmp_path: Path, manifest: Path) -> Iterator[tuple[Any, str]]:
    """The app (in process, no job worker) over a store with an admin key and a run with steps."""
    with reversi.open(f"sqlite:///{tmp_path}/api.db", manifests=[str(manifest)]) as ledger:
        _, key = create_key(ledger.store, "fuzzer", "admin")
        run = ledger.acting_as("fuzzer").start_run("run_fuzz")
        run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
        run.begin("stripe.create_charge", {"amount": 2})
        yield create_app(ledger, run_jobs=False), key


def test_schemathesis_finds_no_server_error_and_no_answer_outside_the_document(served: tuple[Any, str]) -> None:
    app, key = served
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    headers = {"Authorization": f"Bearer {key}"}
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) == len(ENDPOINTS) + 2
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def conforms(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        conforms()


def test_every_link_names_an_operation_of_the_document_and_parameters_it_takes() -> None:
    document = openapi_document(ENDPOINTS)
    operations = {op["operationId"]: op for ops in document["paths"].values() for op in ops.values()
                  if "operationId" in op}
    found = 0
    for op in operations.values():
        for response in op["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                assert set(link["parameters"]) <= {p["name"] for p in target.get("parameters", [])}, link
                assert "requestBody" not in link or "requestBody" in target, link
                found += 1
    assert found >= 30


def _follow(link: dict[str, Any], request_path: dict[str, str], body: Any) -> dict[str, Any]:
    """The values a link gives its next request, from the answer's body and the request's path."""
    values = {}
    for name, expression in link["parameters"].items():
        if expression.startswith("$request.path."):
            values[name] = request_path[expression.removeprefix("$request.path.")]
        else:
            found = body
            for part in expression.removeprefix("$response.body#/").split("/"):
                found = found[part]
            values[name] = str(found)
    return values


def test_the_links_lead_from_a_run_opened_to_a_step_its_outcome_the_plan_and_the_rollback(
    served: tuple[Any, str]
) -> None:
    app, key = served
    links = LINKS

    async def walk() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://reversi",
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            opened = await client.post("/v1/runs", json={})
            run = _follow(links[("open_run", 201)]["RecordStep"], {}, opened.json())
            step = await client.post(f"/v1/runs/{run['run_id']}/steps", json={"tool": "stripe.create_charge",
                                                                                "args": {"amount": 3}})
            done = _follow(links[("record_step", 201)]["RecordOutcome"], run, step.json())
            outcome = await client.post(f"/v1/runs/{done['run_id']}/steps/{done['step']}/outcome",
                                        json={"status": "succeeded", "result": {"id": "ch_3"}})
            planned = _follow(links[("record_outcome", 200)]["GetPlan"], done, outcome.json())
            plan = await client.get(f"/v1/runs/{planned['run_id']}/plan")
            rolled = _follow(links[("get_plan", 200)]["StartRollback"], planned, plan.json())
            rollback = await client.post(f"/v1/runs/{rolled['run_id']}/rollback", json={})
            return [r.status_code for r in (opened, step, outcome, plan, rollback)]

    assert run_coroutine(walk()) == [201, 201, 200, 200, 200]

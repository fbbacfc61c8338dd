"""The OpenAPI document describes what the server does: every route is in it, and schemathesis,
generating requests from it, gets no 5xx and no answer that breaks it (a short run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from reversi.server import create_app
from reversi.server.api import ENDPOINTS
from reversi.server.openapi import openapi_document

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

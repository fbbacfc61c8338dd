"""Schemathesis over the server's whole OpenAPI document, against `reversi-server` in a subprocess over
loopback: every operation on its own, then chains of them that the document's links describe (a run
opened, a step recorded, its outcome, the plan, the rollback; approvals, keys, halts). No answer is a
5xx or outside the document, and a refused request (4xx) changes nothing in the store, and neither
does any GET. A call refused by the journal's rules (a halt, a duplicate) is the one exception: its
refusal is journaled, which is the point of it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.stateful import run_state_machine_as_test
from schemathesis.generation.stateful.state_machine import StepInput
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.store_state import store_state
from tests.server.conftest import ServerProcess

import reversi
from reversi.engine.keys import create_key
from reversi.errors import Refused
from reversi.server.api import ENDPOINTS

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# The codes of refusals, which are journaled (`refused`) by design.
REFUSALS: list[type[Refused]] = [Refused, *Refused.__subclasses__()]
JOURNALED_REFUSALS = {cls.code for cls in REFUSALS}


class Served:
    """`reversi-server` over a SQLite store holding an admin key and a run with steps."""

    def __init__(self, tmp_path: Path, manifest: Path) -> None:
        self.db = f"sqlite:///{tmp_path}/fuzz.db"
        with reversi.open(self.db, manifests=[str(manifest)]) as ledger:
            run = ledger.acting_as("fuzzer").start_run("run_fuzz")
            run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
            run.begin("stripe.create_charge", {"amount": 2})
        self.headers: dict[str, str] = {}
        self.fresh_start()
        self.server = ServerProcess(self.db, {"REVERSI_MANIFEST": str(manifest)}, tmp_path / "server.log")
        self.schema = schemathesis.openapi.from_url(f"{self.server.url}/openapi.json")
        self.answered: Counter[tuple[str, int]] = Counter()

    def fresh_start(self) -> None:
        """A key of its own and no halt, for the next chain of requests: the last one may have revoked
        its key (it is listed, so schemathesis links it to DELETE /v1/keys/{key_id}) or halted every call."""
        with reversi.open(self.db) as ledger:
            _, key = create_key(ledger.store, "fuzzer", "admin")
            ledger.lift_halts()
        self.headers = {"Authorization": f"Bearer {key}"}

    def checked_call(self, case: Any, **kwargs: Any) -> Any:
        """Make the case's request; a refused one (or any GET) must leave the store as it was."""
        before = store_state(self.db)
        response = case.call(headers=self.headers, **kwargs)
        status, operation = response.status_code, case.operation.definition.raw.get("operationId", "?")
        self.answered[(operation, status)] += 1
        tried("http")
        code = _error_code(response) if status >= 400 else None
        if case.method == "GET" or (400 <= status < 500 and code not in JOURNALED_REFUSALS):
            assert store_state(self.db) == before, (case.method, case.formatted_path, status, response.text[:300])
        return response


def _error_code(response: Any) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


@pytest.fixture
def served(tmp_path: Path, manifest: Path) -> Iterator[Served]:
    site = Served(tmp_path, manifest)
    try:
        yield site
    finally:
        site.server.signal(15)
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_every_operation_answers_within_its_document_and_a_refusal_changes_nothing(served: Served) -> None:
    operations = [result.ok() for result in served.schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) == len(ENDPOINTS) + 2
    for operation in operations:

        @fuzz_settings(ci=8)
        @given(case=operation.as_strategy())
        def conforms(case: Any) -> None:
            response = served.checked_call(case)
            case.validate_response(response, checks=CHECKS)

        conforms()


def test_chains_of_linked_requests_answer_within_the_document_and_refusals_change_nothing(served: Served) -> None:
    open_run = served.schema.find_operation_by_id("open_run")

    class Chains(served.schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            """Start from a run opened, as schemathesis does not: it takes the Reversi-Run-Id header
            for a reference to something no operation makes, so it never starts a chain there."""
            served.fresh_start()
            case = open_run.Case(body={})
            self.recorder.record_case(case=case)
            self._add_results_to_targets((), [self.step(StepInput.initial(case))])

        def call(self, case: Any, **kwargs: Any) -> Any:
            return served.checked_call(case, **kwargs)

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    run_state_machine_as_test(Chains, settings=settings(fuzz_settings(ci=20), stateful_step_count=8))
    followed = {op for (op, status) in served.answered if status < 300} & RUN_SCOPED
    assert followed, served.answered  # a link from the run opened was followed


RUN_SCOPED = {ep.handler.__name__ for ep in ENDPOINTS if "{run_id}" in ep.path}

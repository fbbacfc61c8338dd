"""A fake of Stripe's API as its documentation describes it: form-encoded bodies, Bearer secret keys,
the error object `{"error": {"type", "code", "message", "param"}}`, 404 `resource_missing`, and
Idempotency-Key replays (same key and same parameters: the first answer again, with
`Idempotent-Replayed: true`; same key, other parameters: 400 `idempotency_error`)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reversi.core.json_values import JSON, LooseJSONObject
from reversi.demo.fakes.base import FakeBase, bearer

KEY = "sk_test_fake"


def stripe_error(status: int, message: str, code: str | None = None, kind: str = "invalid_request_error",
                 param: str | None = None) -> JSONResponse:
    error = {"type": kind, "message": message, "code": code, "param": param}
    return JSONResponse({"error": {k: v for k, v in error.items() if v is not None}}, status)


_SEARCH_CLAUSE = re.compile(r"metadata\['([^'\\]{1,40})'\]:'([^'\\]{0,500})'")


def _missing(what: str, object_id: str) -> JSONResponse:
    return stripe_error(404, f"No such {what}: '{object_id}'", "resource_missing", param="id")


@dataclass
class FakeStripe(FakeBase):
    charges: dict[str, LooseJSONObject] = field(default_factory=dict)
    refunds: dict[str, LooseJSONObject] = field(default_factory=dict)
    customers: dict[str, LooseJSONObject] = field(default_factory=dict)
    intents: dict[str, LooseJSONObject] = field(default_factory=dict)
    replies: dict[str, tuple[str, str, int, JSON]] = field(default_factory=dict)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.counter):06d}"

    def app(self) -> Starlette:
        routes = [
            Route("/v1/charges", self.create_charge, methods=["POST"]),
            Route("/v1/charges/search", self.search_charges, methods=["GET"]),
            Route("/v1/charges/{id}", self.get_charge, methods=["GET"]),
            Route("/v1/refunds", self.create_refund, methods=["POST"]),
            Route("/v1/customers", self.create_customer, methods=["POST"]),
            Route("/v1/customers/{id}", self.customer, methods=["GET", "DELETE"]),
            Route("/v1/payment_intents", self.create_intent, methods=["POST"]),
            Route("/v1/payment_intents/{id}", self.get_intent, methods=["GET"]),
            Route("/v1/payment_intents/{id}/cancel", self.cancel_intent, methods=["POST"]),
        ]
        return Starlette(routes=[Route(r.path, self._guard(r.endpoint), methods=r.methods) for r in routes])

    def _guard(
        self, endpoint: Callable[[Request, LooseJSONObject], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """Bearer key, then Idempotency-Key replay for POSTs, then the endpoint with the parsed form."""

        async def handle(request: Request) -> Response:
            if not bearer(request, KEY):
                return stripe_error(401, "Invalid API Key provided: ****")
            form = _nested({k: v for k, v in (await request.form()).multi_items() if isinstance(v, str)})
            key = request.headers.get("idempotency-key")
            if request.method != "POST" or not key:
                return await endpoint(request, form)
            fingerprint = json.dumps(form, sort_keys=True)
            seen = self.replies.get(key)
            if seen is not None:
                path, params, status, body = seen
                if (path, params) != (request.url.path, fingerprint):
                    return stripe_error(400, "Keys for idempotent requests can only be used with the same"
                                        " parameters they were first used with. Try using a key other than"
                                        f" '{key}' if you meant to execute a different request.",
                                        kind="idempotency_error")
                return JSONResponse(body, status, headers={"Idempotent-Replayed": "true"})
            response = await endpoint(request, form)
            self.effects[f"{request.url.path} {key}"] += 1
            self.replies[key] = (request.url.path, fingerprint, response.status_code, json.loads(bytes(response.body)))
            return response

        return handle

    async def create_charge(self, request: Request, form: LooseJSONObject) -> Response:
        if "amount" not in form:
            return stripe_error(400, "Missing required param: amount.", "parameter_missing", param="amount")
        charge_id = self.new_id("ch")
        self.charges[charge_id] = {
            "id": charge_id, "object": "charge", "amount": int(form["amount"]), "amount_refunded": 0,
            "currency": form.get("currency", "usd"), "customer": form.get("customer"), "refunded": False,
            "description": form.get("description"),
            "status": "succeeded", "metadata": form.get("metadata", {}), "livemode": False,
        }
        return JSONResponse(self.charges[charge_id])

    async def search_charges(self, request: Request, form: LooseJSONObject) -> Response:
        """Stripe's Search API for charges, as far as `metadata['KEY']:'VALUE'` clauses joined by AND go."""
        query = request.query_params.get("query", "")
        clauses = [part.strip() for part in query.split(" AND ")]
        wanted = [_SEARCH_CLAUSE.fullmatch(clause) for clause in clauses]
        if not query or any(match is None for match in wanted):
            return stripe_error(400, f"Invalid search query: {query[:100]}", "parameter_invalid_string", param="query")
        found = [charge for charge in self.charges.values()
                 if all(charge["metadata"].get(m.group(1)) == m.group(2) for m in wanted if m is not None)]
        return JSONResponse({"object": "search_result", "data": found, "has_more": False,
                             "url": "/v1/charges/search"})

    async def get_charge(self, request: Request, form: LooseJSONObject) -> Response:
        charge = self.charges.get(request.path_params["id"])
        return JSONResponse(charge) if charge else _missing("charge", request.path_params["id"])

    def refund_now(self, charge_id: str, amount: int | None = None) -> JSONResponse:
        """A refund as the dashboard makes one (no idempotency key)."""
        charge = self.charges.get(charge_id)
        if charge is None:
            return stripe_error(400, f"No such charge: '{charge_id}'", "resource_missing", param="charge")
        amount = charge["amount"] - charge["amount_refunded"] if amount is None else amount
        if charge["refunded"]:
            return stripe_error(400, f"Charge {charge_id} has already been refunded.", "charge_already_refunded")
        if charge["amount_refunded"] + amount > charge["amount"]:
            left = charge["amount"] - charge["amount_refunded"]
            return stripe_error(400, f"Refund amount ({amount}) is greater than unrefunded amount on charge"
                                f" ({left})", "amount_too_large", param="amount")
        refund_id = self.new_id("re")
        self.refunds[refund_id] = {"id": refund_id, "object": "refund", "amount": amount, "charge": charge_id,
                                   "status": "succeeded"}
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] == charge["amount"]
        return JSONResponse(self.refunds[refund_id])

    async def create_refund(self, request: Request, form: LooseJSONObject) -> Response:
        amount = form.get("amount")
        return self.refund_now(str(form.get("charge")), int(amount) if amount is not None else None)

    async def create_customer(self, request: Request, form: LooseJSONObject) -> Response:
        customer_id = self.new_id("cus")
        self.customers[customer_id] = {"id": customer_id, "object": "customer", "email": form.get("email"),
                                       "name": form.get("name"), "metadata": form.get("metadata", {})}
        return JSONResponse(self.customers[customer_id])

    async def customer(self, request: Request, form: LooseJSONObject) -> Response:
        customer_id = request.path_params["id"]
        found = self.customers.get(customer_id)
        if found is None:
            return _missing("customer", customer_id)
        if request.method == "DELETE":
            if not found.get("deleted"):
                self.effects[f"delete {customer_id}"] += 1
            self.customers[customer_id] = found = {"id": customer_id, "object": "customer", "deleted": True}
        return JSONResponse(found)

    async def create_intent(self, request: Request, form: LooseJSONObject) -> Response:
        intent_id = self.new_id("pi")
        self.intents[intent_id] = {"id": intent_id, "object": "payment_intent", "amount": int(form["amount"]),
                                   "currency": form.get("currency"), "status": "requires_payment_method",
                                   "canceled_at": None}
        return JSONResponse(self.intents[intent_id])

    async def get_intent(self, request: Request, form: LooseJSONObject) -> Response:
        intent = self.intents.get(request.path_params["id"])
        return JSONResponse(intent) if intent else _missing("payment_intent", request.path_params["id"])

    async def cancel_intent(self, request: Request, form: LooseJSONObject) -> Response:
        intent = self.intents.get(request.path_params["id"])
        if intent is None:
            return _missing("payment_intent", request.path_params["id"])
        if intent["status"] in ("canceled", "succeeded"):
            return stripe_error(400, "You cannot cancel this PaymentIntent because it has a status of"
                                f" {intent['status']}.", "payment_intent_unexpected_state")
        intent.update(status="canceled", canceled_at=1_700_000_000)
        return JSONResponse(intent)


def _nested(flat: dict[str, str]) -> LooseJSONObject:
    """`metadata[order]=7` back into `{"metadata": {"order": "7"}}` (one level, as the tools send)."""
    found: LooseJSONObject = {}
    for name, value in flat.items():
        outer, bracket, inner = name.partition("[")
        if bracket:
            found.setdefault(outer, {})[inner.rstrip("]")] = value
        else:
            found[name] = value
    return found

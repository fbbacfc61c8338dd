"""The `stripe` connector: charges, customers and payment intents over Stripe's REST API.

Requests are form-encoded with the secret key from `STRIPE_API_KEY`, at `STRIPE_API_BASE` (default
https://api.stripe.com). Each forward result comes back sealed (`reversi.connectors._seal`), and each
compensation takes that whole result and acts only on the id its seal covers: a forged or altered
result refunds, deletes and cancels nothing. A compensation sends its idempotency key as Stripe's
`Idempotency-Key` header, so Stripe itself replays the first answer to a repeat; deleting a customer
(a DELETE, where Stripe ignores the header) reads the customer first.

A charge made for a journaled step (through the gateway) carries that step in its metadata
(`reversi_call`: `KEY:RUN:STEP`, KEY the sealing key's id), set by the connector, never by the
caller. So when the answer is lost, the step's probe (`stripe.charge_of_call`, made by `reversi
reconcile` for that step) finds the charge by the step itself, not by anything the agent chose, and
answers it sealed for that step alone, as `stripe.create_charge` would have: the rollback's refund
then accepts it.
"""

from __future__ import annotations

import re

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, sealed_result
from reversi.connectors._base import ToolKind as Kind
from reversi.connectors._http import Service, form_encode
from reversi.connectors._seal import key_id, seal, sealed, unseal
from reversi.core.calls import current_call
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject
from reversi.errors import BadArgument, ChangedSince, DownstreamError, UntrustedResult

__all__ = [
    "CONNECTOR",
    "cancel_payment_intent",
    "charge_of_call",
    "create_charge",
    "create_customer",
    "create_payment_intent",
    "delete_customer",
    "get_charge",
    "get_customer",
    "get_payment_intent",
    "refund",
    "search_charges",
]


def _message(body: LooseJSON) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code") or error.get("type")
    return f"{error.get('message')} ({code})" if code else str(error.get("message"))


STRIPE = Service(
    "Stripe",
    Setting("STRIPE_API_BASE", "Stripe's API", "https://api.stripe.com"),
    Setting("STRIPE_API_KEY", "the secret key (sk_...)", "none: required"),
    _message,
)
_ID = re.compile(r"[A-Za-z0-9_]{1,255}")
CALL_KEY = "reversi_call"  # the metadata key naming the step a charge was made for: the connector's alone


def _id(value: LooseJSON, name: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise BadArgument(name, f"{value!r} is not a Stripe id")
    return value


def _made(result: LooseJSON, tool: str) -> JSONObject:
    """The object `tool` created, from its sealed result (its `id` checked).

    Raises:
        UntrustedResult: the result is not one `tool` of this connector made.
    """
    made = unseal(result, {tool}).result
    if not isinstance(made.get("id"), str) or not _ID.fullmatch(made["id"]):
        raise UntrustedResult(f"the sealed result of {tool} names no Stripe id")
    return made


def _post(path: str, fields: LooseJSONObject, idempotency_key: str | None = None) -> LooseJSON:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return STRIPE.request("POST", path, data=form_encode(fields), headers=headers).body


def _create(path: str, fields: LooseJSONObject) -> JSONObject:
    made = _post(path, fields)
    if not isinstance(made, dict):
        raise DownstreamError(f"Stripe POST {path}: the answer is not an object")
    return made


# --- forward -----------------------------------------------------------------------------------


@sealed("stripe.create_charge")
def create_charge(amount: int, currency: str, customer: str | None = None, source: str | None = None,
                  description: str | None = None, metadata: LooseJSONObject | None = None) -> JSONObject:
    """Charge `amount` (in the currency's smallest unit). Undo: `stripe.refund`.

    Raises:
        BadArgument: `metadata` names `reversi_call`, which the connector sets itself.
    """
    _callers(metadata)
    return _create("/v1/charges", {"amount": amount, "currency": currency, "customer": customer, "source": source,
                                 "description": description, "metadata": {**(metadata or {}), **_made_for()}})


def _callers(metadata: LooseJSONObject | None) -> None:
    """Refuse caller metadata naming the connector's own key (on every object: Stripe may copy an object's
    metadata to the charges it makes).

    Raises:
        BadArgument: it names `reversi_call`.
    """
    if isinstance(metadata, dict) and CALL_KEY in metadata:
        raise BadArgument("metadata", f"{CALL_KEY!r} is the connector's own key: it names the step a charge is for")


def _made_for() -> dict[str, str]:
    """The metadata naming the step this call is made for, when one is known: the sealing key's id, the
    run and the step (`KEY:RUN:STEP`), so that a deployment with another key never takes it for its own."""
    call = current_call()
    return {CALL_KEY: f"{key_id()}:{call.run_id}:{call.step}"} if call is not None else {}


@sealed("stripe.create_customer")
def create_customer(email: str | None = None, name: str | None = None, description: str | None = None,
                    metadata: LooseJSONObject | None = None) -> JSONObject:
    """Create a customer. Undo: `stripe.delete_customer`.

    Raises:
        BadArgument: `metadata` names `reversi_call`, which the connector sets itself.
    """
    _callers(metadata)
    return _create("/v1/customers", {"email": email, "name": name, "description": description, "metadata": metadata})


@sealed("stripe.create_payment_intent")
def create_payment_intent(amount: int, currency: str, customer: str | None = None,
                          payment_method_types: list[str] | None = None,
                          metadata: LooseJSONObject | None = None) -> JSONObject:
    """Create a payment intent. Undo: `stripe.cancel_payment_intent`.

    Raises:
        BadArgument: `metadata` names `reversi_call`, which the connector sets itself.
    """
    _callers(metadata)
    return _create("/v1/payment_intents", {"amount": amount, "currency": currency, "customer": customer,
                                         "payment_method_types": payment_method_types, "metadata": metadata})


# --- compensations -----------------------------------------------------------------------------


def refund(result: JSONObjectView, step: int | None = None, *, idempotency_key: str | None = None) -> LooseJSON:
    """Refund the charge `result` (the sealed result of `stripe.create_charge`) names, the amount it
    charged, with the rollback's idempotency key.

    Raises:
        UntrustedResult: the result is not one this connector's `stripe.create_charge` made.
        ChangedSince: someone else refunded the charge since.
        DownstreamError: Stripe refused or failed.
    """
    charge = _made(result, "stripe.create_charge")
    charge_id, amount = charge["id"], charge.get("amount")
    fields = {"charge": charge_id, "amount": amount if isinstance(amount, int) else None}
    try:
        return _post("/v1/refunds", fields, idempotency_key)
    except DownstreamError as exc:
        if exc.message.endswith(("(charge_already_refunded)", "(amount_too_large)")):
            raise ChangedSince(step, f"charge {charge_id} was refunded by someone else: {exc.message}") from exc
        raise


def delete_customer(result: JSONObjectView, step: int | None = None, *,
                    idempotency_key: str | None = None) -> LooseJSON:
    """Delete the customer `result` (the sealed result of `stripe.create_customer`) names; one already
    deleted (or gone) is answered as Stripe answers a delete.

    Raises:
        UntrustedResult: the result is not one this connector's `stripe.create_customer` made.
    """
    customer_id = _made(result, "stripe.create_customer")["id"]
    path = f"/v1/customers/{customer_id}"
    found = STRIPE.request("GET", path, tolerate=(404,))
    if found.status == 404 or (isinstance(found.body, dict) and found.body.get("deleted")):
        return {"id": customer_id, "object": "customer", "deleted": True}
    return STRIPE.request("DELETE", path).body


def cancel_payment_intent(result: JSONObjectView, step: int | None = None,
                          *, idempotency_key: str | None = None) -> LooseJSON:
    """Cancel the payment intent `result` (the sealed result of `stripe.create_payment_intent`) names,
    with the rollback's idempotency key; one already canceled is answered as is.

    Raises:
        UntrustedResult: the result is not one this connector's `stripe.create_payment_intent` made.
        ChangedSince: it succeeded since (it can no longer be canceled: refund its charge instead).
    """
    payment_intent = _made(result, "stripe.create_payment_intent")["id"]
    path = f"/v1/payment_intents/{payment_intent}"
    found = STRIPE.request("GET", path).body
    status = found.get("status") if isinstance(found, dict) else None
    if status == "canceled":
        return found
    if status == "succeeded":
        raise ChangedSince(step, f"payment intent {payment_intent} succeeded: refund its charge instead")
    return _post(f"{path}/cancel", {}, idempotency_key)


# --- reads -------------------------------------------------------------------------------------


def get_charge(id: str) -> LooseJSON:
    """The charge (its `refunded`, `amount_refunded`, `status`)."""
    return STRIPE.request("GET", f"/v1/charges/{_id(id, 'id')}").body


def search_charges(query: str) -> LooseJSON:
    """Charges found by Stripe's Search API (`metadata['order']:'o-1'`): `{"data": [...]}`."""
    if not isinstance(query, str) or not query.strip() or len(query) > 1000:
        raise BadArgument("query", "expected a search query of Stripe's search language, at most 1000 characters")
    return STRIPE.request("GET", "/v1/charges/search", params={"query": query}).body


def charge_of_call() -> LooseJSONObject:
    """The charge made for the step this read is made for (`reversi reconcile` binds its probe to the
    step): `{"count": N, "result": R}`, where R is the charge, sealed as `stripe.create_charge`'s result
    for that step, when exactly one was made, else null. Stripe's search index can lag a minute behind
    a charge: `count: 0` is not proof that none was made.

    Raises:
        BadArgument: no step is bound to this read (it is only a probe's).
    """
    made_for = _made_for()
    if not made_for:
        raise BadArgument("call", "no step is bound to this read: it answers only a probe that reconcile makes"
                                  " for a step")
    found = search_charges(f"metadata['{CALL_KEY}']:'{made_for[CALL_KEY]}'")
    charges = [c for c in (found.get("data") if isinstance(found, dict) else None) or [] if isinstance(c, dict)
               and (c.get("metadata") or {}).get(CALL_KEY) == made_for[CALL_KEY]
               and not c.get("payment_intent")]  # made by a payment intent, not by stripe.create_charge
    return {"count": len(charges), "result": seal("stripe.create_charge", charges[0]) if len(charges) == 1 else None}


def get_customer(id: str) -> LooseJSON:
    """The customer; `{"id", "deleted": true}` once deleted, as Stripe answers (also when it is gone)."""
    found = STRIPE.request("GET", f"/v1/customers/{_id(id, 'id')}", tolerate=(404,))
    return {"id": id, "object": "customer", "deleted": True} if found.status == 404 else found.body


def get_payment_intent(id: str) -> LooseJSON:
    """The payment intent (its `status`)."""
    return STRIPE.request("GET", f"/v1/payment_intents/{_id(id, 'id')}").body


_AMOUNT = Param("amount", "integer", "in the currency's smallest unit (cents)")
_CURRENCY = Param("currency", "string", "three-letter ISO code, lowercase")
_CUSTOMER = Param("customer", "string", "a customer id (cus_...)", required=False)
_METADATA = Param("metadata", "object", "key-value pairs kept with the object", required=False)
_GET = Param("id", "string", "the object's id")

CONNECTOR = Connector(
    name="stripe",
    description="Stripe charges, customers and payment intents",
    settings=STRIPE.settings,
    tools=(
        Tool("stripe.create_charge", Kind.FORWARD, create_charge, "Charge a customer or a source.",
             (_AMOUNT, _CURRENCY, _CUSTOMER, Param("source", "string", "a payment source", required=False),
              Param("description", "string", "shown in the dashboard", required=False), _METADATA)),
        Tool("stripe.create_customer", Kind.FORWARD, create_customer, "Create a customer.",
             (Param("email", "string", "the customer's email", required=False),
              Param("name", "string", "the customer's name", required=False),
              Param("description", "string", "shown in the dashboard", required=False), _METADATA)),
        Tool("stripe.create_payment_intent", Kind.FORWARD, create_payment_intent, "Create a payment intent.",
             (_AMOUNT, _CURRENCY, _CUSTOMER,
              Param("payment_method_types", "array", "e.g. [\"card\"]", required=False), _METADATA)),
        Tool("stripe.refund", Kind.COMPENSATION, refund, "Refund a charge (Idempotency-Key: the rollback's key).",
             (sealed_result("stripe.create_charge"), STEP), idempotent=True),
        Tool("stripe.delete_customer", Kind.COMPENSATION, delete_customer, "Delete a customer.",
             (sealed_result("stripe.create_customer"), STEP), destructive=True, idempotent=True),
        Tool("stripe.cancel_payment_intent", Kind.COMPENSATION, cancel_payment_intent, "Cancel a payment intent.",
             (sealed_result("stripe.create_payment_intent"), STEP), destructive=True, idempotent=True),
        Tool("stripe.get_charge", Kind.READ, get_charge, "A charge.", (_GET,)),
        Tool("stripe.search_charges", Kind.READ, search_charges, "Charges found by a search query.",
             (Param("query", "string", "e.g. metadata['order']:'o-1'"),)),
        Tool("stripe.charge_of_call", Kind.READ, charge_of_call,
             "The charge made for the step a probe reads for, sealed as its forward result.", ()),
        Tool("stripe.get_customer", Kind.READ, get_customer, "A customer.", (_GET,)),
        Tool("stripe.get_payment_intent", Kind.READ, get_payment_intent, "A payment intent.", (_GET,)),
    ),
)

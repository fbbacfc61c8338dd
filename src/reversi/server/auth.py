"""Who a request acts as, and what that principal may do (SPEC §7).

Roles are cumulative: an operator can do what an agent can, an admin what an operator can. A key
with a tenant confines its principal to that tenant's runs; an agent's runs get that tenant.
Recording (opening, continuing, steps, outcomes) stays with the principal that opened the run.
"""

from __future__ import annotations

from enum import Enum

from reversi.core.models import RunRecord
from reversi.engine.keys import KEYLESS_SERVES, LOCAL_ADMIN, Principal, Role, principal_of_key
from reversi.errors import Forbidden, ReversiError
from reversi.store.keys import any_key, key_is_active
from reversi.store.queries import Queries

_RANK = {Role.AGENT: 0, Role.OPERATOR: 1, Role.ADMIN: 2}
NO_KEYS_REMOTE = f"this server's store holds no API keys: {KEYLESS_SERVES}"
_KEY_REQUIRED = "a valid API key is required: Authorization: Bearer KEY"
_BAD_KEY = "unknown or revoked API key"


class Unauthorized(ReversiError):
    """No key, or a key that is unknown or revoked."""

    code = "unauthorized"
    http_status = 401


class Access(Enum):
    READ = "read"  # the run, its events and its plan: the owner, or an operator of its tenant
    RECORD = "record"  # continue the run, record steps and outcomes: the owner only
    OPERATE = "operate"  # roll back, resolve: an operator of its tenant


def principal_for(q: Queries, authorization: str | None, local_ok: bool) -> Principal:
    """The principal of a request with this `Authorization` header (read with `q`); `local_ok` says
    whether it may act as the keyless admin (`keyless_request_allowed`).

    Raises:
        Unauthorized: the store has keys and the request carries none that is valid; or the store
            has none and the request may not act as `local`.
    """
    key = _bearer(authorization)
    if key is not None:
        principal = principal_of_key(q, key)
        if principal is not None:
            return principal
    if any_key(q):
        raise Unauthorized(_KEY_REQUIRED if key is None else _BAD_KEY)
    if not local_ok:
        raise Unauthorized(NO_KEYS_REMOTE)
    return LOCAL_ADMIN


def check_still_valid(q: Queries, principal: Principal) -> None:
    """Raises Unauthorized if the principal's key was revoked since it was read, or (for the loopback
    admin of a store without keys) if the store holds a key now."""
    if principal.key_id is None:
        if any_key(q):
            raise Unauthorized(_KEY_REQUIRED)
    elif not key_is_active(q, principal.key_id):
        raise Unauthorized(_BAD_KEY)


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def require_role(principal: Principal, role: Role) -> None:
    """Raises Forbidden unless the principal's role is at least `role`."""
    if _RANK[principal.role] < _RANK[role]:
        raise Forbidden(f"this needs an {role.value} key; the key of {principal.name} is {principal.role.value}")


def in_reach(principal: Principal, tenant: str) -> bool:
    """Whether an operator of this principal reaches runs of `tenant`."""
    return principal.tenant is None or principal.tenant == tenant


def check_run(principal: Principal, run: RunRecord, access: Access) -> None:
    """Raises Forbidden (`RUN belongs to another principal`) unless the principal may do `access` on `run`."""
    owner = run.principal == principal.name and in_reach(principal, run.scope.tenant)
    if access is Access.RECORD:
        allowed = owner
    elif access is Access.READ:
        allowed = owner or (principal.is_operator and in_reach(principal, run.scope.tenant))
    else:
        allowed = principal.is_operator and in_reach(principal, run.scope.tenant)
        if not allowed and owner:
            require_role(principal, Role.OPERATOR)
    if not allowed:
        raise Forbidden(f"{run.run_id} belongs to another principal")


def run_tenant(principal: Principal, requested: str) -> str:
    """The tenant of a run this principal opens: its key's tenant, whatever the request says."""
    return principal.tenant if principal.tenant is not None else requested

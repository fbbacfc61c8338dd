"""Who a request acts as, and what that principal may do (SPEC §7): the one access policy.

Roles are cumulative: an operator can do what an agent can, an admin what an operator can. A viewer
stands beside them: it reads what an operator of its tenant reads, and does nothing else. A key
with a tenant confines its principal to that tenant's runs, approvals, halts and keys; an agent's
runs get that tenant. Recording (opening, continuing, steps, outcomes) stays with the principal that
opened the run. Every surface (the server's API and console, the gateway) authenticates with
`authenticate` and acts through `Ledger.for_principal` (`reversi.engine.principal`), whose methods
apply these rules themselves.
"""

from __future__ import annotations

import hashlib
from enum import Enum

from reversi.core.models import RunRecord
from reversi.engine.keys import (
    KEYLESS_SERVES,
    LOCAL_ADMIN,
    Principal,
    Role,
    is_reserved_name,
    principal_of_key,
    principal_of_row,
)
from reversi.errors import Forbidden, Unauthorized
from reversi.store.queries import Queries

_RANK = {Role.VIEWER: -1, Role.AGENT: 0, Role.OPERATOR: 1, Role.ADMIN: 2}
NO_KEYS_REMOTE = f"this store holds no API keys: {KEYLESS_SERVES}"
KEY_REQUIRED = "a valid API key is required: Authorization: Bearer KEY"
BAD_KEY = "unknown or revoked API key"


class Access(Enum):
    READ = "read"  # the run, its events and its plan: the owner, or an operator of its tenant
    RECORD = "record"  # continue the run, record steps and outcomes: the owner only
    OPERATE = "operate"  # roll back, resolve, decide its approvals, follow its jobs: an operator of its tenant


# -- authentication -------------------------------------------------------------------------------


def bearer(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, or None."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def authenticate(q: Queries, key: str | None, local_ok: bool) -> Principal:
    """The principal of a request carrying `key` (None: no key), read with `q`; `local_ok` says
    whether it may act as the keyless admin `local` (`keyless_request_allowed`).

    Raises:
        Unauthorized: the store has keys and the request carries none that is valid (or one named
            `local`, see `principal_of_row`); or the store has none and the request may not act as `local`.
    """
    if key is not None:
        principal = principal_of_key(q, key)
        if principal is not None:
            return principal
    if q.any_key():
        raise Unauthorized(KEY_REQUIRED if key is None else BAD_KEY)
    if not local_ok:
        raise Unauthorized(NO_KEYS_REMOTE)
    return LOCAL_ADMIN


def check_still_valid(q: Queries, principal: Principal) -> None:
    """Raises Unauthorized if the principal's key was revoked since it was read, or (for the loopback
    admin of a store without keys) if the store holds a key now."""
    if principal.key_id is None:
        if q.any_key():
            raise Unauthorized(KEY_REQUIRED)
    elif not q.key_is_active(principal.key_id):
        raise Unauthorized(BAD_KEY)


def session_hash(token: str) -> str:
    """What the store keeps of a console session: a hash of its token (unique per sign-in), never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def session_principal(q: Queries, key_id: str | None, token: str, local_ok: bool) -> Principal | None:
    """The principal of a console session signed in with the key `key_id` (None: nobody signed in),
    if that key is still active and the session was not signed out; else the keyless `local` for a
    request that may act as it (`local_ok`) on a store without keys; else None."""
    if key_id:
        row = q.get_key(key_id)
        if (row is not None and row.revoked_at is None and not is_reserved_name(row.name)
                and not q.is_signed_out(session_hash(token))):
            return principal_of_row(row)
    if local_ok and not q.any_key():
        return LOCAL_ADMIN
    return None


# -- roles and tenants ----------------------------------------------------------------------------


def require_role(principal: Principal, role: Role, *, reading: bool = False) -> None:
    """Raises Forbidden unless the principal's role is at least `role`; `reading`: what is asked only
    reads, and a viewer may read what an operator may."""
    if reading and principal.role is Role.VIEWER and role is not Role.ADMIN:
        return
    if _RANK[principal.role] < _RANK[role]:
        article = "an" if role.value[0] in "aeiou" else "a"
        raise Forbidden(f"this needs {article} {role.value} key; the key of {principal.name} is {principal.role.value}")


def in_reach(principal: Principal, tenant: str | None) -> bool:
    """Whether this principal reaches things of `tenant` (None or "": of no tenant)."""
    return principal.tenant is None or principal.tenant == tenant


def check_run(principal: Principal, run: RunRecord, access: Access) -> None:
    """Raises Forbidden (`RUN belongs to another principal`) unless the principal may do `access` on
    `run`; an owner who may only read is told the role operating it needs."""
    owner = run.principal == principal.name and in_reach(principal, run.scope.tenant)
    if principal.role is Role.VIEWER and access is not Access.READ:
        require_role(principal, Role.OPERATOR if access is Access.OPERATE else Role.AGENT)
    if access is Access.RECORD:
        allowed = owner
    elif access is Access.READ:
        allowed = owner or (principal.reads_tenant and in_reach(principal, run.scope.tenant))
    else:
        allowed = principal.is_operator and in_reach(principal, run.scope.tenant)
        if not allowed and owner:
            require_role(principal, Role.OPERATOR)
    if not allowed:
        raise Forbidden(f"{run.run_id} belongs to another principal")


def may(principal: Principal, run: RunRecord, access: Access) -> bool:
    """Whether `check_run` lets this principal do `access` on `run`."""
    try:
        check_run(principal, run, access)
    except Forbidden:
        return False
    return True


def run_tenant(principal: Principal, requested: str) -> str:
    """The tenant of a run this principal opens: its key's tenant, whatever the request says."""
    return principal.tenant if principal.tenant is not None else requested


def listing_tenant(principal: Principal, requested: str | None) -> tuple[bool, str | None]:
    """For a listing filtered to `requested` (None: any tenant): whether it can hold anything, and
    the tenant to filter on (a confined principal's own, whatever was asked)."""
    if principal.tenant is None:
        return True, requested
    return requested in (None, principal.tenant), principal.tenant


def listing_owner(principal: Principal) -> str | None:
    """Whose runs a principal lists: an agent its own, an operator or a viewer everyone's (None)."""
    return None if principal.reads_tenant else principal.name


def halt_tenant(principal: Principal, requested: str | None) -> str | None:
    """The tenant scope of a halt this principal makes: an admin of one tenant halts that tenant's
    calls only.

    Raises:
        Forbidden: a confined principal asks to halt another tenant.
    """
    confined = principal.tenant
    if confined is None:
        return requested
    if requested not in (None, confined):
        raise Forbidden(f"a key confined to tenant {confined} can only halt tenant {confined}")
    return confined


def key_tenant(principal: Principal, requested: str | None) -> str | None:
    """The tenant of a key this principal creates.

    Raises:
        Forbidden: a confined principal asks for a key of another tenant, or of none.
    """
    confined = principal.tenant
    if confined is not None and requested != confined:
        raise Forbidden(f"a key confined to tenant {confined} can only create keys of tenant {confined}")
    return requested

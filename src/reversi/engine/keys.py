"""API keys and the principals they stand for.

A key reads `rvk_<id>_<secret>`: the id finds the row, the secret is compared with the stored
SHA-256 in constant time (the secret is 256 random bits, so a fast hash is the right one).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
import secrets
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from reversi.core.models import check_id, utc_now
from reversi.errors import BadInput, Conflict, NotFound, Unauthorized
from reversi.store.base import Store
from reversi.store.keys import KeyRow
from reversi.store.queries import Queries

_KEY_RE = re.compile(r"rvk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


class Role(StrEnum):
    VIEWER = "viewer"  # a person who only looks: reads what an operator of its tenant reads, changes nothing
    AGENT = "agent"
    OPERATOR = "operator"
    ADMIN = "admin"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key's name (a run's owner), its role and the tenant it is confined to."""

    name: str
    role: Role
    tenant: str | None = None
    key_id: str | None = None

    @property
    def is_operator(self) -> bool:
        return self.role in (Role.OPERATOR, Role.ADMIN)

    @property
    def reads_tenant(self) -> bool:
        """Whether it reads every run of its tenant (an operator, an admin, a viewer), not only its own."""
        return self.role is not Role.AGENT

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


LOCAL = "local"
LOCAL_ADMIN = Principal(LOCAL, Role.ADMIN)
RESERVED_NAME = (f"the key name {{name!r}} is reserved: `{LOCAL}` is who the CLI and SDK act as on the store, "
                 "and every request to a server without keys; pick another name")


def is_reserved_name(name: str) -> bool:
    """Whether `name` is `local` in any case, width or spacing (a key by that name would own the runs
    the CLI and SDK open as `local`)."""
    return unicodedata.normalize("NFKC", name).strip().casefold() == LOCAL


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(store: Store, name: str, role: str, tenant: str | None = None, *, by: str | None = None
               ) -> tuple[KeyRow, str]:
    """Create a key (`by`: the principal creating it, kept with it); returns its row and the key itself
    (shown this once, never stored).

    A key's name is its principal: keys with one name are one principal (a new key for a name
    replaces an old one's secret, say), so they must share its tenant.

    Raises:
        BadInput: a bad name (or one `is_reserved_name` refuses), role or tenant.
        Conflict: keys with this name have another tenant.
    """
    if isinstance(name, str) and is_reserved_name(name):
        raise BadInput(RESERVED_NAME.format(name=name))
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise BadInput(f"bad key name {name!r}: 1-64 of letters, digits and _ . @ -, starting with a letter or digit")
    try:
        role = Role(role).value
    except ValueError:
        raise BadInput(f"role must be agent, operator or admin, not {role!r}") from None
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip()):
        raise BadInput("tenant must be a non-empty string when given")
    key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
    secret = secrets.token_urlsafe(32)
    row = KeyRow(key_id, name, role, tenant, _sha256(secret), utc_now(), None, by)
    with store.write() as q:
        q.lock_name(f"api_key:{name}")
        others = {other.tenant for other in q.keys_named(name)} - {tenant}
        if others:
            held = next(iter(others))
            raise Conflict(f"the name {name} is a principal of " + (f"tenant {held}" if held else "no tenant")
                           + ": a key for it must have the same tenant")
        q.insert_key(row)
    return row, f"rvk_{key_id}_{secret}"


def list_keys(store: Store, tenant: str | None = None) -> list[KeyRow]:
    """Every key, or (with `tenant`) the keys of that tenant, oldest first."""
    with store.read() as q:
        return q.list_keys(tenant)


def revoke_key(store: Store, key_id: str, tenant: str | None = None, *, last_admin: bool = False,
               by: str | None = None) -> KeyRow:
    """Revoke a key at once (with `tenant`, only a key of that tenant; `by`: the principal revoking it,
    kept with it); requests with it get 401 from then on.

    An admin key is not revoked when it is the last active one that can manage its tenant's keys
    (one of that tenant, or of none): that would leave nobody to manage them over HTTP. `last_admin`
    revokes it all the same (the CLI on the store, which can always create another).

    Raises:
        BadInput: `key_id` does not have the form of a key id.
        NotFound: no such key (of `tenant`).
        Conflict: the last admin key, without `last_admin`.
    """
    check_id("key", key_id)
    with store.write() as q:
        q.lock_name("api_keys:revoke")  # two admins revoking each other at once: one of them is refused
        found = q.get_key(key_id)
        if found is None or (tenant is not None and found.tenant != tenant):
            raise NotFound(f"no key {key_id}")
        if not last_admin and _last_admin(q, found):
            reach = f"tenant {found.tenant}'s keys" if found.tenant else "the store's keys"
            raise Conflict(f"{key_id} ({found.name}) is the last active admin key that can manage {reach}: "
                           "create another admin key first")
        q.revoke_key(key_id, utc_now(), by)
        row = q.get_key(key_id)
    assert row is not None
    return row


def _last_admin(q: Queries, key: KeyRow) -> bool:
    """Whether `key` is an active admin key and no other one can manage its tenant's keys."""
    if key.revoked_at is not None or key.role != Role.ADMIN:
        return False
    return not any(k.role == Role.ADMIN and k.revoked_at is None and k.key_id != key.key_id
                   and k.tenant in (None, key.tenant) for k in q.list_keys())


def store_has_keys(store: Store) -> bool:
    """Whether the store holds any key, even a revoked one: only a store that never held one is served
    to loopback clients as the admin `local` (revoking every key does not reopen it)."""
    with store.read() as q:
        return q.any_key()


def authenticate(store: Store, key: str) -> Principal | None:
    """The principal an active key stands for, or None for anything else.

    Raises:
        Unauthorized: the key is named `local` (see `principal_of_row`).
    """
    with store.read() as q:
        return principal_of_key(q, key)


def principal_of_key(q: Queries, key: str) -> Principal | None:
    """`authenticate` inside a transaction; raises as it."""
    match = _KEY_RE.fullmatch(key.strip()) if isinstance(key, str) else None
    if match is None:
        return None
    row = q.get_key(match.group(1))
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(row.secret_sha256, _sha256(match.group(2))):
        return None
    return principal_of_row(row)


def principal_of_row(row: KeyRow) -> Principal:
    """The principal an active key's row stands for.

    Raises:
        Unauthorized: the key is named `local` (made before the name was reserved): it would own the
            runs of the CLI and SDK.
    """
    if is_reserved_name(row.name):
        raise Unauthorized(f"the key {row.key_id} is refused: " + RESERVED_NAME.format(name=row.name)
                           + " (revoke it and create another)")
    return Principal(row.name, Role(row.role), row.tenant, row.key_id)


KEYLESS_SERVES = "it serves loopback clients only, addressed as this machine and not sent by another site's page"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def keyless_request_allowed(client_host: str | None, host_header: str | None, origin: str | None, *,
                            scheme: str, own_port: int | None) -> bool:
    """Whether a request may act as the admin `local` of a store without keys: it comes from this
    machine, is addressed to this machine by name (a DNS-rebound name is not), and was not sent by a
    page of another origin (a browser names that page in `Origin`; a tool sends none).

    An `Origin` is this server's own only if it is exactly the origin a browser would send from a
    page of this server: the `scheme` and host the request was addressed to (its `Host`) and the port
    the server listens on (`own_port`, from the socket). A page on another loopback port is another site."""
    if not is_loopback(client_host):
        return False
    addressed = _host_and_port(scheme, host_header) if host_header is not None else None
    if host_header is not None and (addressed is None or not is_loopback(addressed[0])):
        return False
    if origin is None:
        return True
    if own_port is None or addressed is None or addressed[1] != own_port:
        return False
    host = f"[{addressed[0]}]" if ":" in addressed[0] else addressed[0]
    return origin == f"{scheme}://{host}" + ("" if _DEFAULT_PORTS.get(scheme) == own_port else f":{own_port}")


def _host_and_port(scheme: str, host_header: str) -> tuple[str, int] | None:
    """The host (lower case) and port (the scheme's default when none is written) a `Host` names."""
    try:
        parts = urlsplit(f"//{host_header}")
        port = parts.port
    except ValueError:  # `[::1`, `host:99999` and the like: no address anyone can name
        return None
    if parts.hostname is None:
        return None
    return parts.hostname, port if port is not None else _DEFAULT_PORTS.get(scheme, 80)


@functools.lru_cache(maxsize=256)
def is_loopback(host: str | None) -> bool:
    """Whether a client or bind address is this machine (a store without keys serves only those)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False

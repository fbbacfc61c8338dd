"""Envelope encryption of the journal's values: each run's values under a data key of its own
(AES-256-GCM), each data key wrapped by a key-encryption key (KEK) the operator holds. Pure: no I/O.

A stored value is `!enc1:<data key id>:<base64 of nonce and ciphertext>`, text no JSON document can
be (JSON never starts with `!`), so a value an agent sent in clear is never taken for one. The
associated data binds each ciphertext to its data key, run and place (`steps.args`, an event's
values), so a ciphertext moved elsewhere does not open. A value that cannot be opened (no KEK for it
here, or its data key erased) reads as `Unreadable`, text that says why, never an error: listings,
plans and exports still work, and the planner says which steps cannot be undone for want of it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from reversi.core.json_values import JSONView, compact

__all__ = [
    "KEY_BYTES",
    "PREFIX",
    "Keyring",
    "Unreadable",
    "is_sealed",
    "new_data_key",
    "open_value",
    "seal_value",
    "sealed_key_id",
    "unwrap",
    "wrap",
]

PREFIX = "!enc1:"
_AFTER_PREFIX = len(PREFIX)
KEY_BYTES = 32
_NONCE = 12


class Unreadable(str):
    """A value this process cannot read, as text that says why (`«unreadable: ...»`); `reason` alone."""

    reason: str

    def __new__(cls, reason: str = "") -> Unreadable:
        made = super().__new__(cls, f"«unreadable: {reason}»")
        made.reason = reason
        return made

    def __reduce__(self) -> tuple[type[Unreadable], tuple[str]]:
        return Unreadable, (self.reason,)


@dataclass(frozen=True)
class Keyring:
    """The key-encryption keys this process holds, by id; `current` wraps new data keys."""

    keys: dict[str, bytes]
    current: str

    def __post_init__(self) -> None:
        assert self.current in self.keys and all(len(k) == KEY_BYTES for k in self.keys.values())


def new_data_key() -> bytes:
    """A fresh random data key."""
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


@lru_cache(maxsize=1024)
def _aead(key: bytes) -> AESGCM:
    return AESGCM(key)


def _seal(key: bytes, plain: bytes, aad: bytes) -> str:
    nonce = os.urandom(_NONCE)
    return base64.b64encode(nonce + _aead(key).encrypt(nonce, plain, aad)).decode()


def _open(key: bytes, text: str, aad: bytes) -> bytes:
    """Raises ValueError: not base64, too short, or not sealed under `key` with `aad`."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
        if len(raw) <= _NONCE:
            raise ValueError("too short")
        return _aead(key).decrypt(raw[:_NONCE], raw[_NONCE:], aad)
    except (InvalidTag, binascii.Error) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def wrap(kek: bytes, data_key: bytes, data_key_id: str, run_id: str) -> str:
    """The data key sealed under a KEK, bound to its id and run."""
    return _seal(kek, data_key, f"dk:{data_key_id}:{run_id}".encode())


def unwrap(kek: bytes, wrapped: str, data_key_id: str, run_id: str) -> bytes:
    """Raises ValueError: `wrapped` was not made by `wrap` with this KEK, id and run."""
    return _open(kek, wrapped, f"dk:{data_key_id}:{run_id}".encode())


def _aad(data_key_id: str, run_id: str, place: str) -> bytes:
    return f"v:{data_key_id}:{run_id}:{place}".encode()


def seal_value(data_key: bytes, data_key_id: str, run_id: str, place: str, value: JSONView) -> str:
    """`value` (JSON) as stored: sealed under the run's data key for `place`."""
    body = _seal(data_key, compact(value).encode("utf-8", "surrogatepass"), _aad(data_key_id, run_id, place))
    return f"{PREFIX}{data_key_id}:{body}"


def is_sealed(text: object) -> bool:
    """Whether stored text is a sealed value (not JSON)."""
    return isinstance(text, str) and text.startswith(PREFIX)


def sealed_key_id(text: str) -> str:
    """The data key id a sealed value names."""
    return text[_AFTER_PREFIX:text.find(":", _AFTER_PREFIX)]


def open_value(data_key: bytes, text: str, run_id: str, place: str) -> object:
    """The value sealed in `text`.

    Raises:
        ValueError: it does not open with this key for this run and place (moved, or damaged).
    """
    key_id, _, body = text.partition(":")[2].partition(":")
    plain = _open(data_key, body, f"v:{key_id}:{run_id}:{place}".encode())
    return json.loads(plain.decode("utf-8", "surrogatepass"))  # authenticated: the JSON this store wrote

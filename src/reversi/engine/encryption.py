"""Where the key-encryption keys come from: `REVERSI_ENCRYPTION_KEYS`, which holds them, names a file
that does (`@PATH`), or a command that prints them (`!COMMAND`, so a KMS or a secret manager fits).

The keys are `ID=BASE64` pairs (32-byte AES keys), separated by commas or whitespace; the first is
the current one, which wraps new data keys; the others only open what they wrapped (keep an old key
listed until `reversi keys rotate-data` has moved everything off it). No message ever quotes a key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reversi.core.envelope import KEY_BYTES, Keyring, unwrap, wrap
from reversi.engine.commands import split_command
from reversi.errors import BadInput, ConfigError
from reversi.store.base import Store

__all__ = ["ENCRYPTION_KEYS", "Rotation", "keyring_from_env", "parse_keys", "rotate_data"]

ENCRYPTION_KEYS = "REVERSI_ENCRYPTION_KEYS"
_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_COMMAND_TIMEOUT_S = 10.0


def parse_keys(text: str, where: str) -> Keyring:
    """The keyring `text` holds (`ID=BASE64` pairs; the first current).

    Raises:
        ConfigError: no pair, a malformed id, a value that is not base64 of 32 bytes, an id twice.
    """
    keys: dict[str, bytes] = {}
    for number, pair in enumerate(re.split(r"[\s,]+", text.strip()), 1):
        if not pair:
            continue
        name, equals, value = pair.partition("=")
        if not equals or not _ID.fullmatch(name):
            raise ConfigError(f"{where}: key {number} is not ID=BASE64 (an id of 1-64 letters, digits, . _ -)")
        try:
            key = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != KEY_BYTES:
            raise ConfigError(f"{where}: key {name} is not base64 of {KEY_BYTES} bytes (make one with: "
                              "python -c \"import os, base64; print(base64.b64encode(os.urandom(32)).decode())\")")
        if name in keys:
            raise ConfigError(f"{where}: key {name} is listed twice")
        keys[name] = key
    if not keys:
        raise ConfigError(f"{where}: no key: expected ID=BASE64, the first the current one")
    return Keyring(keys, next(iter(keys)))


def keyring_from_env() -> Keyring | None:
    """The keyring `REVERSI_ENCRYPTION_KEYS` gives, or None when it is unset or empty.

    Raises:
        ConfigError: the keys, the file or the command's output cannot be read as a keyring.
    """
    value = os.environ.get(ENCRYPTION_KEYS, "").strip()
    if not value:
        return None
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return parse_keys(path.read_text(), f"{ENCRYPTION_KEYS} file {path}")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{ENCRYPTION_KEYS}: cannot read the key file {path}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    if value.startswith("!"):
        return parse_keys(_command_output(value[1:]), f"{ENCRYPTION_KEYS} command")
    return parse_keys(value, ENCRYPTION_KEYS)


def _command_output(command: str) -> str:
    try:
        argv = split_command(command, f"{ENCRYPTION_KEYS}'s command")
    except BadInput as exc:
        raise ConfigError(exc.message) from None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{ENCRYPTION_KEYS}: the command {argv[0]} did not run: {exc}") from None
    if done.returncode != 0:
        raise ConfigError(f"{ENCRYPTION_KEYS}: the command {argv[0]} exited {done.returncode}")
    return done.stdout


@dataclass(frozen=True)
class Rotation:
    """What `rotate_data` did: data keys moved onto the current KEK, and those it could not move (under
    a KEK this process does not hold), by KEK id."""

    current: str
    moved: int
    stuck: dict[str, int]

    def to_dict(self) -> dict[str, object]:
        return {"current": self.current, "moved": self.moved, "stuck": dict(self.stuck)}


def rotate_data(store: Store, *, batch: int = 200, on_batch: Callable[[int], None] | None = None) -> Rotation:
    """Re-wrap every live data key that is under another KEK with the current one, a batch per
    transaction: values are not rewritten, reads and writes go on meanwhile (the old KEK stays listed
    until this is done), and a run cut short is finished by running it again.

    Raises:
        ConfigError: this process holds no KEK (REVERSI_ENCRYPTION_KEYS is unset).
        BadInput: `batch` is not a positive count.
    """
    keyring = store.vault.keyring
    if keyring is None:
        raise ConfigError(f"rotating data keys needs the keys: set {ENCRYPTION_KEYS} (the new key first)")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise BadInput(f"the batch size must be a positive number of data keys, not {batch!r}")
    current, moved = keyring.current, 0
    while True:
        with store.write() as q:
            rows = q.data_keys_to_rewrap(current, batch, among=[k for k in keyring.keys if k != current])
            for row in rows:
                assert row.wrapped is not None
                plain = unwrap(keyring.keys[row.kek_id], row.wrapped, row.data_key_id, row.run_id)
                rewrapped = wrap(keyring.keys[current], plain, row.data_key_id, row.run_id)
                moved += q.rewrap_data_key(row.data_key_id, row.kek_id, current, rewrapped)
        if on_batch is not None and rows:
            on_batch(moved)
        if len(rows) < batch:
            break
    with store.read() as q:
        counts = q.count_data_keys()
    stuck = {kek: n for kek, n in counts.items() if kek and kek != current}
    return Rotation(current, moved, stuck)

"""Which values are sensitive, and how they are shown: masked, in a form that still tells two values
apart. Pure: no I/O.

A value is sensitive when
- its key's name is one of the names of secrets (`password`, `token`, `api_key`, `authorization`, card
  numbers...: `DEFAULT_NAMES`, and those the configuration adds), or ends with `_` and one of the
  names that cannot be anything else (`github_token`, `x_api_key`, `db_password`); `token_count` or
  `idempotency_key` are not;
- its path is listed under the tool's `sensitive:` in the manifest (`args.password`, `result.*.secret`);
- it is text equal to a value found sensitive elsewhere in the same run (an error quoting a token).
Inside any text, a URL's password, the values of its secret-named query parameters, `Bearer`/`Basic`
credentials and card numbers (13-19 digits that pass the Luhn check) are masked too.

The mask is `«sensitive:1a2b3c4d»`: the first 8 hex digits of an HMAC-SHA256, under a key of the store's,
of the value's canonical JSON. The same value masks the same way everywhere in one store; without the
key nobody can test a guess against a mask.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from reversi.core.json_values import JSONView, LooseJSON, canonical
from reversi.errors import BadInput

__all__ = ["DEFAULT_NAMES", "KEPT", "MASK_RE", "Masker", "SensitivePath", "is_sensitive_name", "parse_path",
           "sensitive_references"]

DEFAULT_NAMES = frozenset({
    "password", "passwd", "passphrase", "secret", "client_secret", "token", "access_token", "refresh_token",
    "id_token", "auth_token", "bearer", "api_key", "apikey", "api_secret", "authorization", "proxy_authorization",
    "cookie", "set_cookie", "private_key", "secret_key", "access_key", "session_token", "card_number",
    "cardnumber", "card", "cvc", "cvv", "cvv2", "pin", "ssn", "iban", "otp",
})
# A key ending in `_` and one of these is sensitive whatever comes before: `github_token`, `db_password`.
_SUFFIXES = ("password", "passwd", "secret", "token", "api_key", "apikey", "private_key", "secret_key",
             "access_key")
MASK_RE = re.compile(r"«sensitive:[0-9a-f]{8}»")
_MAX_DEPTH = 64
_MIN_KNOWN = 4  # a known value shorter than this is not searched for in text (it would mask "a", "1")

# RE2: the text scanned is whatever an agent sent, so each pattern runs in time linear in it.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_URL_PASSWORD = re2.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]*:)(?P<secret>[^\s/@]+)@", _OPTIONS)
_QUERY = re2.compile(r"(?P<head>[?&;](?P<name>[A-Za-z0-9_.\-]+)=)(?P<secret>[^&#\s\"']+)", _OPTIONS)
_CREDENTIAL = re2.compile(r"(?P<head>\b(?i:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9._~+/=\-]{8,})", _OPTIONS)
_CARD = re2.compile(r"\b\d(?:[ \-]?\d){12,18}\b", _OPTIONS)


def _normal(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def is_sensitive_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a key named `name` holds a secret (`DEFAULT_NAMES`, the `extra` names, the suffixes)."""
    key = _normal(name)
    if key in DEFAULT_NAMES or key in {_normal(e) for e in extra}:
        return True
    return any(key.endswith("_" + suffix) for suffix in _SUFFIXES)


@dataclass(frozen=True)
class SensitivePath:
    """A path under a tool's `args` or `result`: each part a key or `*` (any key or list item)."""

    root: str  # "args" or "result"
    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join((self.root, *self.parts))


def parse_path(text: object) -> SensitivePath:
    """A manifest's `sensitive:` entry (`args.password`, `result.items.*.token`) as a path.

    Raises:
        BadInput: it is not `args` or `result` followed by dot-separated keys.
    """
    if not isinstance(text, str) or not text:
        raise BadInput(f"a sensitive path must be text such as args.password, not {text!r}")
    root, *parts = text.split(".")
    if root not in ("args", "result") or not parts or any(not p for p in parts):
        raise BadInput(f"sensitive path {text!r}: expected args.KEY or result.KEY, with more .KEY or .* parts")
    return SensitivePath(root, tuple(parts))


KEPT = ("kept in the journal so the undo can run (encrypted at rest when REVERSI_ENCRYPTION_KEYS is set), "
        "masked wherever it is shown")
_REFERENCE = re.compile(r"\$(args|result)((?:\.[A-Za-z0-9_\-]+|\[\d+\])+)")


def sensitive_references(template: JSONView, paths: Sequence[SensitivePath], names: Iterable[str] = ()) -> list[str]:
    """The `$args...` / `$result...` references in a compensation's or read-back's `template` that name
    a sensitive value: a key of a secret's name on the way, or a path the tool marks (or below it)."""
    found: list[str] = []

    def visit(value: JSONView) -> None:
        if isinstance(value, Mapping):
            for v in value.values():
                visit(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, str):
            for match in _REFERENCE.finditer(value):
                parts = [p for p in re.split(r"[.\[\]]", match[2]) if p]
                marked = any(p.root == match[1] and _covers(p.parts, parts) for p in paths)
                if marked or any(is_sensitive_name(part, names) for part in parts):
                    found.append(match[0])

    visit(template)
    return sorted(set(found))


def _covers(marked: tuple[str, ...], parts: list[str]) -> bool:
    """Whether the reference `parts` is at or below the marked path."""
    return len(parts) >= len(marked) and all(m in ("*", p) for m, p in zip(marked, parts, strict=False))


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


@dataclass
class Masker:
    """Masks what is sensitive in values about to be shown, under the store's masking `key`.

    `names`: extra key names from the configuration; `paths`: a tool's `sensitive:` paths. Feed it a
    run's values first (`learn`) so that text quoting one of them is masked too. One masker per view:
    what it learns is what that view may show masked."""

    key: bytes
    names: frozenset[str] = frozenset()
    paths: Callable[[str], Sequence[SensitivePath]] = lambda tool: ()
    known: dict[str, str] = field(default_factory=dict)  # a sensitive text seen -> its mask

    def mask(self, value: JSONView) -> str:
        """The mask of one value."""
        text = canonical(value, text_fallback=True)
        digest = hmac.new(self.key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"«sensitive:{digest[:8]}»"

    def _remember(self, value: JSONView) -> str:
        if isinstance(value, str) and MASK_RE.fullmatch(value):
            return value  # masked already (a view masks in more than one pass)
        shown = self.mask(value)
        if isinstance(value, str) and len(value) >= _MIN_KNOWN:
            self.known.setdefault(value, shown)
        return shown

    def learn(self, tool: str, args: JSONView, result: JSONView = None) -> None:
        """Note the sensitive values of one call (by key name and by the tool's paths), so that
        `text` masks them wherever they are quoted."""
        self.call(tool, args, result)

    def call(self, tool: str, args: JSONView, result: JSONView = None) -> tuple[LooseJSON, LooseJSON]:
        """A call's arguments and result, masked (each shaped as it came)."""
        paths = self.paths(tool)
        return (self.value(args, [p.parts for p in paths if p.root == "args"]),
                self.value(result, [p.parts for p in paths if p.root == "result"]))

    def value(self, value: JSONView, paths: Sequence[tuple[str, ...]] = ()) -> LooseJSON:
        """`value` with every sensitive part masked: by key name, by the `paths` (relative to it),
        and in its text; shaped as it came."""
        return self._walk(value, list(paths), 0)

    def _walk(self, value: JSONView, paths: list[tuple[str, ...]], depth: int) -> LooseJSON:
        if any(not p for p in paths):
            return self._remember(value)
        if depth > _MAX_DEPTH:
            return self.mask(value)
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                name = str(k)
                if is_sensitive_name(name, self.names) and v is not None and v != "":
                    out[k] = self._remember(v)
                    continue
                below = [p[1:] for p in paths if p[0] in ("*", name)]
                out[k] = self._walk(v, below, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [self._walk(v, [p[1:] for p in paths if p[0] in ("*", str(i))], depth + 1)
                    for i, v in enumerate(value)]
        if isinstance(value, str):
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        """`text` with the secrets it holds masked: known sensitive values, URL passwords, secret-named
        query parameters, credentials after `Bearer`/`Basic`, card numbers."""
        text = str(text)  # a str subclass (an unreadable value) is shown as its text
        for secret, shown in self.known.items():
            if secret in text:
                text = text.replace(secret, shown)
        text = _URL_PASSWORD.sub(lambda m: m["head"] + self.mask(m["secret"]) + "@", text)
        text = _QUERY.sub(lambda m: m["head"] + self.mask(m["secret"]) if is_sensitive_name(m["name"], self.names)
                          or _normal(m["name"]) in ("key", "sig", "signature", "code") else m[0], text)
        text = _CREDENTIAL.sub(lambda m: m["head"] + self.mask(m["secret"]), text)
        return str(_CARD.sub(lambda m: self.mask(m[0]) if _luhn(re.sub(r"\D", "", m[0])) else m[0], text))

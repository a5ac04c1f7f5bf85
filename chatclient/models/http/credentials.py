"""Secrets in the HTTP layer: API keys checked and resolved, credential headers found, URLs redacted.

Secrets travel only in headers; every value here exists so that no error text, ``repr`` or log line
ever shows one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from chatclient.redaction import MaskedMapping, Secret

_SENSITIVE_HEADER = re.compile(r"authorization|cookie|api[-_]?key|token|secret|password|auth", re.IGNORECASE)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def validate_api_key(value: str | Secret | None, *, source: str = "api_key") -> str | None:
    """The key with surrounding whitespace stripped, ``None`` if empty; bad keys raise ``ValueError``.

    A key must be printable ASCII (what an HTTP header can carry; ``httpx`` refuses anything
    else). A ``Secret`` is unwrapped. The error names ``source`` and the position, never the key.

    >>> validate_api_key("  sk-abc\\n")
    'sk-abc'
    """
    if isinstance(value, Secret):
        value = value.reveal()
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{source} must be a str, got {type(value).__name__}")
    key = value.strip()
    for position, ch in enumerate(key):
        if not (" " <= ch <= "~"):
            kind = "a control character" if ch < " " or ch == "\x7f" else "a non-ASCII character"
            raise ValueError(
                f"the API key from {source} contains {kind} at position {position}; API keys are printable "
                "ASCII - copy the key again (a key read from a file or pasted from a document often carries "
                "stray characters)"
            )
    return key or None


def resolve_api_key(
    api_key: str | Secret | None, env_var: str, *, provider: str, required: bool, where: str = ""
) -> tuple[str | None, str]:
    """The validated key (argument, else ``env_var``) and a description of where it came from.

    ``required`` makes a missing key a ``ValueError`` naming ``env_var`` at construction, instead
    of an HTTP 401 at the first call. An explicit ``api_key=""`` means "send no key".
    """
    source = "the api_key argument" if api_key is not None else f"the {env_var} environment variable"
    raw = api_key if api_key is not None else os.environ.get(env_var)
    key = validate_api_key(raw, source=source)
    if key is None and required:
        raise ValueError(
            f"{provider} needs an API key{where}: set the {env_var} environment variable or pass api_key=...; "
            "for a local or self-hosted server pass its base_url (the key is then optional)"
        )
    return key, (source if key else f"no API key (set {env_var} or pass api_key=...)")


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` (the OpenTelemetry rule for ``url.full``).

    >>> redact_url("https://me:pw@example.com:8443/v1?x=1")
    'https://example.com:8443/v1?x=1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _credential_headers(headers: Mapping[str, str]) -> list[str]:
    """Header names whose values are credentials, judged by name."""
    return [name for name in headers if _SENSITIVE_HEADER.search(name)]


def _header_secrets(headers: Mapping[str, str]) -> list[str]:
    found: list[str] = []
    for name in _credential_headers(headers):
        value = headers[name]
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token", "apikey"):
            found.append(token)
    return found


_SIGV4_SIGNATURE = re.compile(r"Signature=([0-9a-f]{16,})")
_ROTATING_KEEP = 16  # per-request credentials remembered for scrubbing (tokens rotate: the last few)


def _per_request_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials in the headers a per-request hook added (an Entra ID bearer token, a SigV4
    session token and signature): what the scrubber must know before an error can echo them.

    Unlike ``_header_secrets`` a whole ``Authorization`` value is not taken when its scheme is
    SigV4: its long public parts (``SignedHeaders=content-type;host``) would redact ordinary text.
    """
    found: list[str] = []
    for name in _credential_headers(headers):
        value = headers[name]
        scheme, _, rest = value.partition(" ")
        if scheme.upper().startswith("AWS4-"):
            found += _SIGV4_SIGNATURE.findall(rest)
        elif rest and scheme.lower() in ("bearer", "basic", "token", "apikey"):
            found.append(rest)
        else:
            found.append(value)
    return found


def with_secrets(secrets: tuple[str, ...], fixed: int, fresh: list[str]) -> _Secrets:
    """``secrets`` (whose first ``fixed`` are the constructor's) plus ``fresh`` ones, keeping only the
    last few per-request secrets so a long-lived model does not collect every token it ever used."""
    from chatclient.redaction import _MIN_SECRET

    new = [v for v in fresh if len(v) >= _MIN_SECRET and v not in secrets]
    if not new:
        return secrets if isinstance(secrets, _Secrets) else _Secrets(secrets)
    rotating = [*secrets[fixed:], *new][-_ROTATING_KEEP:]
    return _Secrets([*secrets[:fixed], *rotating])


def _check_headers(headers: Mapping[str, str]) -> None:
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP header name")
        if not isinstance(value, str):
            raise TypeError(f"the value of header {name!r} must be a str, got {type(value).__name__}")
        if any(not (" " <= ch <= "~") and ch != "\t" for ch in value):
            raise ValueError(
                f"the value of header {name!r} contains a control or non-ASCII character; header values must "
                "be printable ASCII (look for a trailing newline)"
            )


class _Secrets(tuple[str, ...]):
    """The secret values themselves; their repr never shows them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} secret(s)>"


class _RedactedHeaders(MaskedMapping):
    """Request headers whose repr hides values, so tracebacks with locals never show a key."""


def env_or(value: str | None, *names: str) -> str | None:
    """``value`` if given, else the first non-empty environment variable of ``names``."""
    if value is not None:
        return value
    for name in names:
        found = os.environ.get(name)
        if found:
            return found
    return None

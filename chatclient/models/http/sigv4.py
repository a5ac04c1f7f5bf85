"""AWS Signature Version 4 for the Bedrock provider: signing, credentials, and where they come from.

Sans-IO and standard library only (``hmac``/``hashlib``), so it is checked against AWS's published
test suite without any network or SDK. ``sign`` returns the headers to add to a request
(``x-amz-date``, ``x-amz-security-token`` for temporary credentials, ``authorization``).

Credentials: ``AWSCredentials.of((key_id, secret[, session_token]))`` for explicit ones; with
``None``, ``CredentialSource`` takes the ``AWS_*`` environment variables, else botocore's chain when
botocore is installed (shared config and credentials files, SSO, container and instance roles,
with its own refreshing), resolved at the first request and fetched again for every request.

    >>> creds = AWSCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    >>> creds
    AWSCredentials(access_key_id='AKIDEXAMPLE', secret_access_key='…', session_token=None)
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from chatclient.errors import AuthenticationError

__all__ = ["ALGORITHM", "AWSCredentials", "CredentialSource", "canonical_request", "sign", "string_to_sign"]

ALGORITHM = "AWS4-HMAC-SHA256"
_UNRESERVED = "-_.~"


@dataclass(frozen=True, slots=True)
class AWSCredentials:
    """An access key pair, with the session token of temporary credentials; the secret never shows in ``repr``."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = None

    def __repr__(self) -> str:
        token = "'…'" if self.session_token else "None"
        return f"AWSCredentials(access_key_id={self.access_key_id!r}, secret_access_key='…', session_token={token})"

    @classmethod
    def of(cls, value: Any) -> AWSCredentials:
        """Credentials from an ``AWSCredentials`` or a ``(key_id, secret[, session_token])`` tuple."""
        if isinstance(value, AWSCredentials):
            return value
        if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
            raise TypeError("credentials must be (access_key_id, secret_access_key[, session_token]) or None")
        if not all(isinstance(v, str) for v in value) or not value[0].strip() or not value[1].strip():
            raise ValueError("credentials must hold a non-empty access key id and secret access key (strings)")
        token = value[2] if len(value) == 3 and value[2] else None
        return cls(value[0].strip(), value[1].strip(), token.strip() if token else None)

    def secrets(self) -> list[str]:
        """The values that must never show in a message or log line."""
        return [s for s in (self.secret_access_key, self.session_token) if s]


# -- the signing steps ----------------------------------------------------------------------------


def _uri_encode(text: str) -> str:
    return quote(text, safe=_UNRESERVED)


def _canonical_query(query: str) -> str:
    pairs: list[tuple[str, str]] = []
    for item in query.split("&"):
        if not item:
            continue
        key, _, value = item.partition("=")
        pairs.append((_uri_encode(unquote(key)), _uri_encode(unquote(value))))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    default = 443 if parts.scheme == "https" else 80
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def _header_items(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), str(v)) for k, v in items]


def _canonical_headers(headers: Sequence[tuple[str, str]]) -> tuple[str, str]:
    grouped: dict[str, list[str]] = {}
    for name, value in headers:
        # Trimmed, with runs of spaces inside the value folded to one (the SigV4 rule).
        grouped.setdefault(name.strip().lower(), []).append(" ".join(value.split()))
    names = sorted(grouped)
    lines = "".join(f"{name}:{','.join(grouped[name])}\n" for name in names)
    return lines, ";".join(names)


def canonical_request(
    method: str, url: str, headers: Mapping[str, str] | Iterable[tuple[str, str]], body: bytes
) -> tuple[str, str]:
    """(the canonical request, the signed header names) of a request whose headers are all signed.

    The path is taken as it goes on the wire and URI-encoded once more, the rule of every AWS
    service but S3 (a Bedrock model id's ``:`` travels as ``%3A`` and is signed as ``%253A``).
    """
    parts = urlsplit(url)
    lines, signed = _canonical_headers(_header_items(headers))
    path = quote(parts.path or "/", safe="/" + _UNRESERVED)
    payload = hashlib.sha256(body).hexdigest()
    return f"{method.upper()}\n{path}\n{_canonical_query(parts.query)}\n{lines}\n{signed}\n{payload}", signed


def _scope(stamp: str, region: str, service: str) -> str:
    return f"{stamp[:8]}/{region}/{service}/aws4_request"


def string_to_sign(canonical: str, stamp: str, region: str, service: str) -> str:
    """The string to sign for a canonical request made at ``stamp`` (``YYYYMMDDTHHMMSSZ``)."""
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{stamp}\n{_scope(stamp, region, service)}\n{digest}"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _signature(secret: str, stamp: str, region: str, service: str, to_sign: str) -> str:
    key = _hmac(("AWS4" + secret).encode("utf-8"), stamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes,
    credentials: AWSCredentials,
    *,
    region: str,
    service: str,
    now: datetime | None = None,
) -> dict[str, str]:
    """The headers that sign this request: ``x-amz-date``, ``x-amz-security-token`` when the
    credentials carry one, and ``authorization``.

    Every header in ``headers`` is signed, plus ``host`` (taken from ``url`` unless given) and the
    added ``x-amz-*`` headers; send exactly those values. ``now`` is for tests (default: the clock).
    """
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    items = _header_items(headers)
    names = {name.lower() for name, _ in items}
    added = {"x-amz-date": stamp}
    if credentials.session_token:
        added["x-amz-security-token"] = credentials.session_token
    signed_items = list(items)
    if "host" not in names:
        signed_items.append(("host", _host(url)))
    signed_items += [(k, v) for k, v in added.items() if k not in names]
    canonical, signed = canonical_request(method, url, signed_items, body)
    to_sign = string_to_sign(canonical, stamp, region, service)
    signature = _signature(credentials.secret_access_key, stamp, region, service, to_sign)
    added["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{_scope(stamp, region, service)}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return added


# -- where credentials come from ---------------------------------------------------------------------


def _env_credentials() -> AWSCredentials | None:
    key_id = os.environ.get("AWS_ACCESS_KEY_ID", "").strip()
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "").strip()
    if not key_id or not secret:
        return None
    token = os.environ.get("AWS_SESSION_TOKEN", "").strip() or None
    return AWSCredentials(key_id, secret, token)


def _botocore_available() -> bool:
    try:
        import botocore.session  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


class CredentialSource:
    """Where a model's AWS credentials come from; ``get()`` answers for each request.

    Explicit credentials, else the ``AWS_*`` environment at construction, else botocore's chain
    (when installed), looked up at the first request; botocore's refreshable credentials (roles,
    SSO) are fetched again for every request so they renew on their own. Pickles without any live
    botocore object.
    """

    def __init__(self, credentials: Any = None, *, profile: str | None = None) -> None:
        self.profile = profile
        self.fixed: AWSCredentials | None = AWSCredentials.of(credentials) if credentials is not None else None
        if self.fixed is None and profile is None:
            self.fixed = _env_credentials()
        if self.fixed is None and not _botocore_available():
            raise ValueError(
                "Bedrock needs AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                "AWS_SESSION_TOKEN for temporary ones), pass credentials=(key_id, secret[, session_token]), or "
                "install botocore (pip install 'chatclient[bedrock]') to use profiles, SSO and roles"
            )
        self._lock = threading.Lock()
        self._chain: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"profile": self.profile, "fixed": self.fixed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.profile = state["profile"]
        self.fixed = state["fixed"]
        self._lock = threading.Lock()
        self._chain = None

    @property
    def source(self) -> str:
        """Where the credentials come from, for error messages (never the values)."""
        if self.fixed is not None:
            return f"access key {self.fixed.access_key_id[:4]}… (given or from the AWS_* environment)"
        return (
            f"botocore's credential chain (profile {self.profile!r})" if self.profile else "botocore's credential chain"
        )

    def get(self) -> AWSCredentials:
        """The credentials to sign the next request with."""
        if self.fixed is not None:
            return self.fixed
        try:
            with self._lock:
                if self._chain is None:
                    import botocore.session  # type: ignore[import-untyped]

                    self._chain = botocore.session.Session(profile=self.profile).get_credentials()
                chain = self._chain
            frozen = chain.get_frozen_credentials() if chain is not None else None
        except Exception as exc:  # botocore's own errors (expired SSO token, unknown profile, ...)
            raise AuthenticationError(
                f"Bedrock could not get AWS credentials from {self.source}: {type(exc).__name__}: {str(exc)[:200]}"
            ) from None
        if frozen is None:
            self._chain = None
            raise AuthenticationError(
                "Bedrock found no AWS credentials: botocore's chain (environment, shared files, SSO, "
                "instance and container roles) had none - configure a profile or pass credentials=..."
            )
        return AWSCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)

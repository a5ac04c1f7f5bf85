"""The one HTTP layer under every provider: pooled httpx clients, retries, typed errors, streaming.

``HTTPTransport`` sends JSON requests (or an ``EncodedBody``: ``multipart_body`` for file uploads) and
reads JSON, line streams or raw bytes (``post_binary``, ``stream_bytes``) with the same rules in sync
and async code:

* timeouts: a number means that many seconds for reading/writing and at most 10 s to connect; an
  ``httpx.Timeout`` is used as is;
* retries (``max_retries``, default 2) with exponential backoff and jitter on connection errors,
  timeouts and HTTP 408/409/429/5xx, honouring ``Retry-After`` / ``retry-after-ms``; never on other
  4xx, nor on a request that cannot be sent as built (``ModelRequestError``). A streamed request is
  retried only until its response starts; a stream that breaks later raises, because part of it
  has already been handed to the caller;
* errors from ``chatclient.errors`` naming the provider, the URL (without credentials), the status,
  the provider's error code/type and request id, and the likely fix;
* secrets (API keys, credential headers, ``user:password@`` in ``base_url``) travel only in headers
  and are scrubbed, in every representation and in part, from every error text, ``repr`` and log
  line; redirects are followed by the transport itself and never carry them to another origin;
* bounds (``ResponseLimits``) on body size, stream line and event size;
* one pooled ``httpx.Client`` / ``httpx.AsyncClient`` per transport, created lazily and reused
  (or injected by the caller, who then keeps ownership and closes it).

``HTTPChatModel`` is the base class of the chat providers: it drives the four modes from three pure
provider hooks (prompt -> body, payload -> response, stream line -> chunks).

One module per responsibility: ``credentials`` (API keys, credential headers, URL redaction),
``error_mapping`` (statuses and transport failures -> typed errors), ``retry`` (``RetryPolicy``),
``limits`` (timeouts, ``ResponseLimits``), ``redirects``, ``lane`` (which path a POST takes),
``streams`` (line streams with their bounds), ``multipart`` (non-JSON request bodies), ``transport`` (``HTTPTransport``) and ``chat_model``
(``HTTPChatModel``). The public names are imported from this package.

The wire machinery under them lives here too: ``stdlib_http`` (the HTTP/1.1 socket lane),
``aiohttp_transport``, ``sse`` (Server-Sent Events and NDJSON decoding), ``eventstream`` (AWS
event-stream frames), ``sigv4`` (AWS request signing), ``response_headers`` and ``_pooled``. The
provider modules (``chatclient.models.openai`` and its siblings) sit one folder up.
"""

from __future__ import annotations

from chatclient.models.http._pooled import PooledHTTPResource
from chatclient.models.http.chat_model import HTTPChatModel, StreamParser, assistant_text
from chatclient.models.http.credentials import _check_headers as _check_headers
from chatclient.models.http.credentials import _credential_headers as _credential_headers
from chatclient.models.http.credentials import _header_secrets as _header_secrets
from chatclient.models.http.credentials import (
    env_or,
    redact_url,
    resolve_api_key,
    validate_api_key,
)
from chatclient.models.http.error_mapping import error_for_status, parse_retry_after
from chatclient.models.http.lane import LANE_ENV
from chatclient.models.http.limits import DEFAULT_TIMEOUT, ResponseLimits
from chatclient.models.http.multipart import EncodedBody, FilePart, multipart_body
from chatclient.models.http.retry import RetryPolicy
from chatclient.models.http.stdlib_http import KEEPALIVE_EXPIRY
from chatclient.models.http.transport import BinaryAnswer, HTTPTransport
from chatclient.models.http.transport import logger as logger
from chatclient.redaction import REDACTED, scrub

__all__ = [
    "DEFAULT_TIMEOUT",
    "KEEPALIVE_EXPIRY",
    "LANE_ENV",
    "REDACTED",
    "BinaryAnswer",
    "EncodedBody",
    "FilePart",
    "HTTPChatModel",
    "HTTPTransport",
    "PooledHTTPResource",
    "ResponseLimits",
    "RetryPolicy",
    "StreamParser",
    "assistant_text",
    "env_or",
    "multipart_body",
    "error_for_status",
    "parse_retry_after",
    "redact_url",
    "resolve_api_key",
    "scrub",
    "validate_api_key",
]

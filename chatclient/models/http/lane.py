"""Lane selection: which path a POST takes to the server, and the shape of an answer on each path.

Three paths carry a request: the socket lane (``chatclient.models.http.stdlib_http``, HTTP/1.1 on plain
sockets, sync and async), a client's ``AiohttpTransport`` reached past httpx's client layer
(``direct_post``), and httpx itself. Every path hands back an answer with the few attributes the
HTTP layer reads (``_Answer``); redirects and error statuses continue on httpx.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Protocol

import httpx

logger = logging.getLogger("chatclient.models.http")


class _Answer(Protocol):
    """What the HTTP layer reads of an answer: an ``httpx.Response``, or the lighter response of a
    direct path (``aiohttp_transport.DirectResponse``, ``stdlib_http.StdlibResponse``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def encoding(self) -> str | None: ...

    @property
    def url(self) -> object: ...

    @property
    def reason_phrase(self) -> str: ...


class _AsyncAnswer(_Answer, Protocol):
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class _SyncAnswer(_Answer, Protocol):
    def iter_bytes(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _DirectAnswer(_AsyncAnswer, Protocol):
    def as_httpx(self, request: httpx.Request) -> httpx.Response: ...


class _DirectPoster(Protocol):
    async def direct_post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout
    ) -> _DirectAnswer: ...


def _log_answer(url: str, answer: _Answer) -> None:
    # The line httpx logs for every response, for the answers that bypass it (same logger level, same
    # wording), so a log that showed requests before still does.
    if logger.isEnabledFor(logging.INFO):
        logger.info('HTTP Request: POST %s "HTTP/1.1 %d %s"', url, answer.status_code, answer.reason_phrase)


def _direct_poster(client: httpx.AsyncClient) -> _DirectPoster | None:
    """The transport under ``client`` if a POST can go to it straight, past httpx's client layer.

    Only a transport that offers ``direct_post`` (``AiohttpTransport``), and only while the client
    adds nothing of its own to a request: no auth, event hooks, cookies, query parameters or
    mounted transports (the client's default headers are merged in by the caller).
    """
    transport = getattr(client, "_transport", None)
    if getattr(transport, "direct_post", None) is None:
        return None
    hooks = client.event_hooks
    if client.auth is not None or hooks["request"] or hooks["response"] or client.params or client.cookies:
        return None
    if getattr(client, "_mounts", None):
        return None
    return transport  # type: ignore[return-value]


LANE_ENV = "CHATCLIENT_SOCKET_LANE"
"""Environment variable that turns the socket lane off for every model: ``0``, ``false``, ``off`` or ``no``."""

_OFF = frozenset({"0", "false", "off", "no"})
_ON = frozenset({"", "1", "true", "on", "yes"})


def env_lane_setting() -> bool:
    """Whether ``CHATCLIENT_SOCKET_LANE`` leaves the lane on (unset: on); ``ValueError`` for a value it does not know."""
    setting = os.environ.get(LANE_ENV, "").strip().lower()
    if setting in _OFF:
        return False
    if setting in _ON:
        return True
    raise ValueError(
        f"{LANE_ENV}={setting[:20]!r} is not understood: set it to 0 (the socket lane off, every request "
        "through httpx) or 1 (on, the default)"
    )


def lane_allowed(socket_lane: bool | None = None) -> bool:
    """Whether a transport that owns its clients may send plain POSTs over the socket lane.

    ``socket_lane`` is the model's keyword: ``False`` turns the lane off and ``True`` on; ``None``
    leaves it to ``CHATCLIENT_SOCKET_LANE`` (``0`` turns it off for every model). Proxy settings
    always turn it off, since httpx's own clients follow them and the lane does not; NO_PROXY alone
    (listed as "no") sends nothing through a proxy.
    """
    if socket_lane is False or (socket_lane is None and not env_lane_setting()):
        return False
    from urllib.request import getproxies

    return not any(scheme != "no" for scheme in getproxies())

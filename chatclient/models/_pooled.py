"""Closing and context-manager support shared by everything that owns an ``HTTPTransport``.

Its own module so that light modules (the moderation client) can use it without importing httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from chatclient._pickling import Reconstructible

if TYPE_CHECKING:
    from chatclient.models.http import HTTPTransport


class PooledHTTPResource(Reconstructible):
    """Closing and context-manager support for anything that owns an ``HTTPTransport`` as ``_http``.

    ``close()``/``aclose()`` release pooled connections; clients injected by the caller are left to
    their owner. Pickles as its constructor arguments (``chatclient._pickling``): the pool is
    rebuilt where it is unpickled, and a key from the environment is read there again.
    """

    _http: HTTPTransport

    def close(self) -> None:
        """Release pooled connections."""
        self._http.close()

    async def aclose(self) -> None:
        """Async ``close``."""
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

"""Closing and context-manager support shared by everything that owns an ``HTTPTransport``.

Its own module so that light modules (the moderation client) can use it without importing httpx.
"""

from __future__ import annotations

from typing import Any, Self

from chatclient._pickling import Reconstructible


class PooledHTTPResource(Reconstructible):
    """Closing and context-manager support for anything that owns an ``HTTPTransport`` as ``_http``.

    ``close()``/``aclose()`` release pooled connections; clients injected by the caller are left to
    their owner. Pickles as its constructor arguments (``chatclient._pickling``): the pool is
    rebuilt where it is unpickled, and a key from the environment is read there again.
    """

    # An ``HTTPTransport``, which imports this module: typed by the subclasses that use more of it
    # (``HTTPChatModel._http: HTTPTransport``), since no import here may run back up to it.
    _http: Any

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

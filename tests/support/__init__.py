"""Test support: the loopback HTTP server that speaks the providers' wire formats.

A test module gets the fixtures with::

    loopback_server, server = server_fixtures()

``loopback_server`` runs one server per module; ``server`` is that server with its scripts and
recorded requests cleared for the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatclient.models.base import ChatModel, ChatResponse, aggregate
from chatclient.prompt import Prompt
from tests.support.loopback import LoopbackServer

MODES = ("call", "stream", "acall", "astream")


def invoke(model: ChatModel, prompt: Prompt, mode: str) -> tuple[ChatResponse, list[ChatResponse]]:
    """Run ``prompt`` in ``mode``: (the response, the stream chunks); calls have no chunks.

    Streams are aggregated with ``aggregate()``, exactly as a caller would.
    """
    if mode == "call":
        return model.call(prompt), []
    if mode == "acall":
        return asyncio.run(model.acall(prompt)), []
    if mode == "stream":
        chunks = list(model.stream(prompt))
    elif mode == "astream":

        async def collect() -> list[ChatResponse]:
            return [c async for c in model.astream(prompt)]

        chunks = asyncio.run(collect())
    else:
        raise ValueError(mode)
    return aggregate(chunks), chunks


def server_fixtures() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The (module-scoped server, per-test cleared server) fixture pair."""

    @pytest.fixture(scope="module")
    def loopback_server() -> Iterator[LoopbackServer]:
        with LoopbackServer() as srv:
            yield srv

    @pytest.fixture
    def server(loopback_server: LoopbackServer) -> LoopbackServer:
        loopback_server.reset()
        return loopback_server

    return loopback_server, server


__all__ = ["MODES", "LoopbackServer", "invoke", "server_fixtures"]

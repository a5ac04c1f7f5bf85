"""Shared test helpers: run one request spec in any of the four modes."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from chatclient.client import ChatClientRequestSpec
from chatclient.models.base import aggregate
from chatclient.request import ChatClientResponse

MODES = ("call", "stream", "acall", "astream")


def run_spec(spec: ChatClientRequestSpec, mode: str) -> ChatClientResponse:
    """Run ``spec`` in ``mode`` and return one ChatClientResponse (streams are aggregated, context of the last chunk)."""
    if mode == "call":
        return spec.call().chat_client_response()
    if mode == "acall":
        return asyncio.run(spec.acall().chat_client_response())
    if mode == "stream":
        chunks = list(spec.stream().chat_client_response())
    elif mode == "astream":

        async def collect() -> list[ChatClientResponse]:
            return [c async for c in spec.astream().chat_client_response()]

        chunks = asyncio.run(collect())
    else:
        raise ValueError(mode)
    assert chunks, "the stream produced no chunk"
    merged = aggregate(c.chat_response for c in chunks if c.chat_response is not None)
    return ChatClientResponse(merged, chunks[-1].context)


def run_text(spec: ChatClientRequestSpec, mode: str) -> str | None:
    cr = run_spec(spec, mode).chat_response
    return None if cr is None else cr.text


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """Parametrises a test over the four modes."""
    return str(request.param)


def services_required() -> bool:
    """CI sets CHATCLIENT_REQUIRE_SERVICES=1: a service that is down must fail the test, not skip it."""
    return os.environ.get("CHATCLIENT_REQUIRE_SERVICES") == "1"


def unavailable(reason: str) -> Any:
    """Skip locally, fail in CI, when a required service does not answer."""
    if services_required():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


# CI runs property tests derandomized so a run is reproducible; locally they explore new examples each run.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    _hypothesis_settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by folder so ``-m integration`` / ``-m e2e`` select whole suites."""
    for item in items:
        parts = item.path.parts
        if "integration" in parts:
            item.add_marker(pytest.mark.integration)
        elif "e2e" in parts:
            item.add_marker(pytest.mark.e2e)

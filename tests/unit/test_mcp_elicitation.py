"""answer_elicitation on the SDK's own request types: URL mode, and what reaches the handler."""

from __future__ import annotations

import asyncio

import pytest

from chatclient.mcp._sdk import types
from chatclient.mcp.elicitation import ElicitationRequest, ElicitationResponse, answer_elicitation

pytestmark = pytest.mark.mcp


def test_url_mode_reaches_the_handler_and_accept_sends_no_content() -> None:
    seen: list[ElicitationRequest] = []

    def ask(request: ElicitationRequest) -> ElicitationResponse:
        seen.append(request)
        return ElicitationResponse.accept({"ignored": True})

    params = types.ElicitRequestURLParams(
        mode="url", message="Link your account", url="https://example.com/link", elicitation_id="e1"
    )
    result = asyncio.run(answer_elicitation(ask, params, server="srv"))
    assert isinstance(result, types.ElicitResult) and result.action == "accept" and result.content is None
    assert (seen[0].mode, seen[0].url, seen[0].requested_schema) == ("url", "https://example.com/link", {})


def test_a_long_message_is_cut_before_the_user_reads_it() -> None:
    seen: list[str] = []

    def ask(request: ElicitationRequest) -> ElicitationResponse:
        seen.append(request.message)
        return ElicitationResponse.cancel()

    params = types.ElicitRequestFormParams(message="m" * 100_000, requested_schema={"type": "object", "properties": {}})
    result = asyncio.run(answer_elicitation(ask, params, server="srv"))
    assert isinstance(result, types.ElicitResult) and result.action == "cancel"
    assert len(seen[0]) == 8192

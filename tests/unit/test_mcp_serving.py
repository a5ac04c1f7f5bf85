"""serve()'s content mapping and completion helpers, without a transport."""

from __future__ import annotations

import asyncio
import enum
from typing import Literal

import pytest

from chatclient.mcp import EmbeddedResource
from chatclient.mcp._sdk import types
from chatclient.mcp.server import _media_content, _prompt_messages, _resource_contents
from chatclient.mcp.serving import choices_of, complete_values
from chatclient.messages import Media, UserMessage

pytestmark = pytest.mark.mcp


class Size(enum.Enum):
    S = "small"
    L = "large"


def test_choices_come_from_literal_and_enum_only() -> None:
    assert choices_of(Literal["a", "b"]) == ["a", "b"]
    assert choices_of(Size) == ["small", "large"]
    assert choices_of(str) == [] and choices_of(int | None) == []


def test_list_sources_filter_by_prefix_and_functions_may_be_async() -> None:
    assert asyncio.run(complete_values(["paris", "park", "rome"], "par", {})) == (["paris", "park"], 2)

    async def cities(value: str, context: dict[str, str]) -> list[str]:
        return [f"{context['country']}:{value}"]

    assert asyncio.run(complete_values(cities, "x", {"country": "fr"})) == (["fr:x"], 1)


@pytest.mark.parametrize(
    ("mime", "data", "kind"),
    [
        ("image/png", b"\x89PNG", types.ImageContent),
        ("audio/wav", b"RIFF", types.AudioContent),
        ("application/pdf", "https://example.com/a.pdf", types.ResourceLink),
        ("application/zip", b"PK", types.TextContent),  # no URI to embed it under: announced as text
    ],
)
def test_media_become_the_matching_content(mime: str, data: bytes | str, kind: type) -> None:
    assert isinstance(_media_content(Media(mime, data)), kind)


def test_embedded_resources_are_text_for_text_types_and_blobs_otherwise() -> None:
    text = _media_content(EmbeddedResource("application/json", b'{"a": 1}', uri="data://a"))
    assert isinstance(text.resource, types.TextResourceContents) and text.resource.text == '{"a": 1}'
    blob = _media_content(EmbeddedResource("image/png", b"\x00\x01", uri="data://b"))
    assert isinstance(blob.resource, types.BlobResourceContents) and blob.resource.blob == "AAE="
    assert isinstance(_resource_contents("x://y", "plain"), types.TextResourceContents)


def test_prompt_messages_carry_images_as_messages_of_their_own() -> None:
    messages = _prompt_messages([UserMessage("look", (Media("image/png", b"\x89PNG"),))])
    assert [type(m.content) for m in messages] == [types.TextContent, types.ImageContent]
    assert [m.role for m in messages] == ["user", "user"]


class _Connection:
    """Stands for a client connection: ResourceChanges holds it weakly, like the SDK's session."""


def test_subscriptions_of_connections_gone_free_their_uris() -> None:
    from chatclient.mcp.serving import ResourceChanges

    changes = ResourceChanges(max_subscriptions=10)

    async def one_client(round_: int) -> None:
        connection = _Connection()
        for i in range(10):
            changes.subscribe(f"notes://{round_}/{i}", connection)
        del connection  # the client went away without unsubscribing

    async def many_clients() -> None:
        for round_ in range(50):
            await one_client(round_)

    asyncio.run(many_clients())
    # Clients that left cannot grow the table without bound: no URI of a gone connection stays listed.
    assert len(changes._subscribers) <= changes.max_subscriptions

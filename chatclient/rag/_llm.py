"""Helpers for RAG modules that ask a language model (through a ChatClient) to rewrite text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from chatclient.templates import JinjaTemplateRenderer, TemplateRenderer, default_renderer

if TYPE_CHECKING:
    from chatclient.client import ChatClient, ChatClientBuilder


def as_client(chat_client: ChatClient | ChatClientBuilder) -> ChatClient:
    """Accept a ChatClient or its builder (built once here)."""
    from chatclient.client import ChatClient, ChatClientBuilder

    if isinstance(chat_client, ChatClient):
        return chat_client
    if isinstance(chat_client, ChatClientBuilder):
        return chat_client.build()
    raise TypeError(f"expected a ChatClient or ChatClient builder, got {type(chat_client).__name__}")


def check_template(template: str, required: Iterable[str], renderer: TemplateRenderer | None = None) -> str:
    """Fail at construction (not at the first request) when a template lacks a required placeholder."""
    if not isinstance(template, str) or not template.strip():
        raise ValueError("template cannot be None or empty")
    r = renderer or default_renderer()
    if isinstance(r, JinjaTemplateRenderer):
        missing = sorted(set(required) - r.variables(template))
        if missing:
            raise ValueError("The following placeholders must be present in the prompt template: " + ",".join(missing))
    return template


def render(template: str, variables: Mapping[str, Any], renderer: TemplateRenderer | None = None) -> str:
    """Render with our jinja renderer; values are inserted as data and never re-rendered."""
    return (renderer or default_renderer()).render(template, variables)


def ask(client: ChatClient, text: str) -> str | None:
    """Send ``text`` verbatim as the user message and return the answer text."""
    return client.prompt().user(text).call().content()


async def aask(client: ChatClient, text: str) -> str | None:
    """Async :func:`ask`."""
    result: str | None = await client.prompt().user(text).acall().content()
    return result

"""Helpers for RAG modules that ask a language model (through a ChatClient) to rewrite text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from chatclient.templates import JinjaTemplateRenderer, TemplateRenderer, default_renderer


class PromptingClient(Protocol):
    """What RAG modules and the summarizing memory need of a ``ChatClient``: ``prompt()``.

    ``chatclient.client`` sits above ``rag`` and ``memory`` (it assembles them), so they name the
    client by this protocol rather than import it, not even for types.
    """

    def prompt(self) -> Any: ...


class PromptingClientBuilder(Protocol):
    """A ``ChatClient`` builder, as far as these helpers are concerned: ``build()``."""

    def build(self) -> PromptingClient: ...


def as_client(chat_client: PromptingClient | PromptingClientBuilder) -> PromptingClient:
    """Accept a ChatClient or its builder (built once here)."""
    if callable(getattr(chat_client, "prompt", None)):
        return chat_client  # type: ignore[return-value]
    build = getattr(chat_client, "build", None)
    if callable(build):
        client = build()
        if callable(getattr(client, "prompt", None)):
            return client  # type: ignore[no-any-return]
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


def ask(client: PromptingClient, text: str) -> str | None:
    """Send ``text`` verbatim as the user message and return the answer text."""
    answer: str | None = client.prompt().user(text).call().content()
    return answer


async def aask(client: PromptingClient, text: str) -> str | None:
    """Async :func:`ask`."""
    result: str | None = await client.prompt().user(text).acall().content()
    return result

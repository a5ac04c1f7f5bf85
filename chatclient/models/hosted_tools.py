"""How providers tell hosted tools (``chatclient.tools.builtin``) from function tools in a prompt.

A hosted tool reaches the model as a ``HostedToolDefinition`` in ``Prompt.tools``; the provider asks
the tool object for its declaration in the provider's API. A provider that cannot run a hosted tool
raises ``UnsupportedFeatureError`` while building the request body, so no HTTP call is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatclient.errors import UnsupportedFeatureError
from chatclient.prompt import HostedToolDefinition, ToolDefinition

__all__ = ["function_tools", "split_tools"]


def _unsupported(t: HostedToolDefinition, provider: str) -> UnsupportedFeatureError:
    kind = type(t.tool).__name__ if t.tool is not None else t.name
    return UnsupportedFeatureError(
        f"{provider} cannot run the hosted tool {kind} ({t.name!r}); remove it from .tools(...) or use a model "
        "that runs it (see chatclient.tools.builtin for which provider offers which hosted tool)",
        feature=t.name,
        provider=provider,
    )


def split_tools(
    tools: Sequence[ToolDefinition], *, api: str, provider: str
) -> tuple[list[ToolDefinition], list[dict[str, Any]], list[str]]:
    """(function tools, hosted tool declarations for ``api``, beta headers they need, in order)."""
    functions: list[ToolDefinition] = []
    declarations: list[dict[str, Any]] = []
    betas: list[str] = []
    for t in tools:
        if not isinstance(t, HostedToolDefinition):
            functions.append(t)
            continue
        declare = getattr(t.tool, "declaration", None)
        found = declare(api) if callable(declare) else None
        if found is None:
            raise _unsupported(t, provider)
        declaration, beta = found
        declarations.append(declaration)
        if beta and beta not in betas:
            betas.append(beta)
    return functions, declarations, betas


def function_tools(tools: Sequence[ToolDefinition], *, provider: str) -> Sequence[ToolDefinition]:
    """``tools`` when none is hosted; a provider without hosted tools raises ``UnsupportedFeatureError``."""
    for t in tools:
        if isinstance(t, HostedToolDefinition):
            raise _unsupported(t, provider)
    return tools

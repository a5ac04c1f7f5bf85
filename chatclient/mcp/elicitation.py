"""Answering a server's ``elicitation/create`` request with a callback the application chose.

A server asks the user for a few values (``requestedSchema``: a flat object of strings, numbers,
booleans and enums) or to visit a URL. ``McpClient(..., elicitation=ask)`` hands each request to
``ask(request) -> ElicitationResponse`` (sync or async); the schema is checked before the callback
sees it and the answer is checked against the schema before the server does.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from chatclient.mcp._schemas import check_input_schema
from chatclient.mcp._sdk import types

MAX_ELICITATION_PROPERTIES = 64
MAX_ELICITATION_MESSAGE_CHARS = 8_192
"""A server's message is cut here before the callback sees it (it is shown to a person)."""
PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})
_log = logging.getLogger("chatclient.mcp")


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """What a server asks the user: ``message`` plus a form (``requested_schema``) or a ``url`` to open."""

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationResponse:
    """The user's answer: ``accept`` with ``content`` (form values), ``decline``, or ``cancel``.

    >>> ElicitationResponse.accept({"name": "Ada"}).action
    'accept'
    """

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationResponse:
        """The user filled the form (or agreed to open the URL)."""
        return cls("accept", dict(content or {}))

    @classmethod
    def decline(cls) -> ElicitationResponse:
        """The user said no."""
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationResponse:
        """The user dismissed the request without choosing."""
        return cls("cancel")


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], "ElicitationResponse | Awaitable[ElicitationResponse]"]
"""``ask(request) -> ElicitationResponse`` (or ``async``): the application's way to ask its user."""


def check_requested_schema(schema: Any) -> str | None:
    """Why ``schema`` is not an elicitation form the client will show (``None`` when it is).

    MCP allows a flat object whose properties are strings, numbers, integers, booleans, or arrays of
    enum values (multi-select); anything nested, or larger than the tool-schema bounds, is refused.
    """
    problem = check_input_schema(schema)
    if problem is not None:
        return problem.replace("input schema", "requested schema")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return "the requested schema's properties are not an object"
    if len(properties) > MAX_ELICITATION_PROPERTIES:
        return f"the requested schema has {len(properties)} properties, more than {MAX_ELICITATION_PROPERTIES}"
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            return f"property {name!r} is not an object"
        kind = prop.get("type")
        if kind == "array":
            items = prop.get("items")
            if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
                return f"property {name!r} is an array whose items are not a list of choices"
        elif kind not in PRIMITIVE_TYPES:
            return f"property {name!r} has type {kind!r}; an elicitation form holds only flat values"
    return None


def _check_answer(schema: Mapping[str, Any], content: Mapping[str, Any]) -> str | None:
    import importlib

    jsonschema: Any = importlib.import_module("jsonschema")
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(dict(content)), key=str)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the answer"
        return f"{where}: {errors[0].message[:300]}"
    return None


def _defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``default`` of each property (SEP-1034): what an accepted form holds where the user typed nothing."""
    properties = schema.get("properties", {})
    return {
        name: prop["default"] for name, prop in properties.items() if isinstance(prop, Mapping) and "default" in prop
    }


def _to_request(params: Any, server: str) -> ElicitationRequest:
    message = str(params.message)[:MAX_ELICITATION_MESSAGE_CHARS]
    if getattr(params, "mode", "form") == "url":
        return ElicitationRequest(server, message, mode="url", url=str(params.url))
    return ElicitationRequest(server, message, requested_schema=dict(params.requested_schema))


def _refuse(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_PARAMS, message=message)


async def answer_elicitation(
    handler: ElicitationHandler, params: Any, *, server: str
) -> types.ElicitResult | types.ErrorData:
    """The server's ``elicitation/create`` answered by ``handler``; an ``ErrorData`` when it cannot be.

    A hostile or malformed schema is refused before ``handler`` runs; a handler that fails or
    returns something else, or an accepted answer that does not fit the schema, answers the server
    with an error (and a warning on the ``chatclient.mcp`` logger), never with unchecked data.
    Properties the accepted answer leaves out take the schema's ``default`` (SEP-1034).
    """
    if getattr(params, "mode", "form") != "url":
        problem = check_requested_schema(params.requested_schema)
        if problem is not None:
            _log.warning("refused an elicitation request of MCP server %s: %s", server, problem)
            return _refuse(f"elicitation refused: {problem}")
    request = _to_request(params, server)
    try:
        response = handler(request)
        if inspect.isawaitable(response):
            response = await response
    except Exception as exc:
        _log.warning("the elicitation handler failed for MCP server %s: %s", server, type(exc).__name__)
        return _refuse("the client could not ask its user")
    if not isinstance(response, ElicitationResponse):
        _log.warning("the elicitation handler returned %s, not ElicitationResponse", type(response).__name__)
        return _refuse("the client could not ask its user")
    if response.action != "accept":
        return types.ElicitResult(action=response.action)
    if request.mode == "url":
        return types.ElicitResult(action="accept")
    content = {**_defaults(request.requested_schema), **dict(response.content or {})}
    problem = _check_answer(request.requested_schema, content)
    if problem is not None:
        _log.warning("the answer to an elicitation of MCP server %s does not fit its schema: %s", server, problem)
        return _refuse(f"the user's answer does not fit the requested schema ({problem})")
    return types.ElicitResult(action="accept", content=content)


__all__ = [
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "answer_elicitation",
    "check_requested_schema",
]

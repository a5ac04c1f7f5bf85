"""Tool-argument augmentation: extra arguments the model fills in on every tool call.

``AugmentedToolCallbackProvider(tools, arguments=AgentThinking, on_arguments=record)`` adds the
fields of ``AgentThinking`` (a pydantic model or dataclass) to the input schema of every tool it
wraps — the model's reasoning, its confidence, the user's intent — without touching the tools.
On each call the extra values are validated into an ``AgentThinking``, handed to ``on_arguments``
as an ``AugmentedArgumentEvent``, and (by default) removed before the real tool runs, so the tool
never sees them. Spring AI's ``AugmentedToolCallbackProvider``, ported.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chatclient.prompt import ToolDefinition
from chatclient.tools.callback import ToolArgumentsError, ToolCallback, is_tool_callback
from chatclient.tools.context import ToolContext
from chatclient.tools.providers import ToolProviderRequest, provider_callbacks
from chatclient.tools.results import ToolResult

T = TypeVar("T")

MAX_ARGUMENTS_CHARS = 1_000_000
"""Arguments text longer than this is refused before parsing (the model's output is outside input)."""


@dataclass(frozen=True, slots=True)
class AugmentedArgumentEvent(Generic[T]):
    """One call's extra arguments: the tool's (augmented) definition, the model's raw JSON text and
    the extra values validated into the argument type."""

    tool_definition: ToolDefinition
    raw_input: str
    arguments: T


def _extra_schema(argument_type: Any) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The properties, required names and ``$defs`` of ``argument_type``'s JSON schema."""
    from pydantic import TypeAdapter

    try:
        schema = TypeAdapter(argument_type).json_schema()
    except Exception as exc:
        raise TypeError(f"arguments= must be a pydantic model or dataclass with a JSON schema: {exc}") from exc
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
        raise TypeError(
            f"arguments= must describe an object with fields (a pydantic model or dataclass), not {argument_type!r}"
        )
    return properties, list(schema.get("required", [])), dict(schema.get("$defs", {}))


class AugmentedToolCallback:
    """One tool with the extra arguments added to its schema (built by ``AugmentedToolCallbackProvider``)."""

    def __init__(
        self,
        delegate: ToolCallback,
        argument_type: Any,
        on_arguments: Callable[[AugmentedArgumentEvent[Any]], Any],
        *,
        remove_extra_arguments: bool = True,
    ) -> None:
        from pydantic import TypeAdapter

        self.delegate = delegate
        self.remove_extra_arguments = remove_extra_arguments
        self._on_arguments = on_arguments
        self._adapter: Any = TypeAdapter(argument_type)
        properties, required, defs = _extra_schema(argument_type)
        self._extra = tuple(properties)
        original = delegate.definition
        schema = copy.deepcopy(dict(original.input_schema))
        own = schema.setdefault("properties", {})
        clash = sorted(set(own) & set(properties))
        if clash:
            raise ValueError(
                f"tool {original.name!r} already has parameter(s) {', '.join(clash)}; "
                "rename the augmented argument field(s)"
            )
        own.update(copy.deepcopy(properties))
        schema["required"] = [*schema.get("required", []), *required]
        if defs:
            merged = schema.setdefault("$defs", {})
            for key, value in defs.items():
                if key in merged and merged[key] != value:
                    raise ValueError(
                        f"tool {original.name!r}: schema definition {key!r} clashes with the augmented arguments"
                    )
                merged[key] = value
        self._definition = ToolDefinition(original.name, original.description, schema)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def return_direct(self) -> bool:
        return self.delegate.return_direct

    def __getattr__(self, name: str) -> Any:
        # timeout, return_direct_if_last, requires_approval, compensator, is_async: the tool's own.
        if name.startswith("__") or name == "delegate":
            raise AttributeError(name)
        return getattr(self.delegate, name)

    def _split(self, arguments: str | None) -> str:
        """Hand the extra values to ``on_arguments``; the arguments text for the real tool."""
        raw = arguments if arguments is not None and arguments.strip() else "{}"
        name = self._definition.name
        if len(raw) > MAX_ARGUMENTS_CHARS:
            raise ToolArgumentsError(f"tool {name!r}: arguments over {MAX_ARGUMENTS_CHARS:,} characters", name)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ToolArgumentsError(f"tool {name!r}: arguments are not valid JSON ({exc})", name) from None
        if not isinstance(data, dict):
            raise ToolArgumentsError(f"tool {name!r}: arguments must be a JSON object", name)
        extra = {k: data[k] for k in self._extra if k in data}
        from pydantic import ValidationError

        try:
            value = self._adapter.validate_python(extra)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ToolArgumentsError(f"tool {name!r}: invalid augmented arguments: {problems}", name) from None
        self._on_arguments(AugmentedArgumentEvent(self._definition, raw, value))
        if not self.remove_extra_arguments:
            return raw
        return json.dumps({k: v for k, v in data.items() if k not in self._extra})

    def call(self, arguments: str, context: ToolContext | Mapping[str, Any] | None = None) -> str | ToolResult:
        """Record the extra arguments, then run the tool with the rest."""
        return self.delegate.call(self._split(arguments), context)  # type: ignore[arg-type]

    async def acall(self, arguments: str, context: ToolContext | Mapping[str, Any] | None = None) -> str | ToolResult:
        """Async twin of ``call``."""
        rest = self._split(arguments)
        acall = getattr(self.delegate, "acall", None)
        if acall is not None:
            return await acall(rest, context)  # type: ignore[no-any-return]
        import asyncio

        return await asyncio.to_thread(self.delegate.call, rest, context)  # type: ignore[arg-type]

    def bind_arguments(self, arguments: str | None, context: ToolContext | Mapping[str, Any] | None = None) -> Any:
        """The tool's own binding (for its undo function), without the extra arguments."""
        data = json.loads(arguments or "{}")
        rest = json.dumps({k: v for k, v in data.items() if k not in self._extra})
        return self.delegate.bind_arguments(rest, context)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"AugmentedToolCallback({self.delegate!r}, extra={list(self._extra)})"


class AugmentedToolCallbackProvider:
    """Wraps ``tools`` (``@tool`` functions, tool objects, callbacks, other providers) so every tool
    asks the model for the fields of ``arguments`` too.

    ``on_arguments(event)`` receives an ``AugmentedArgumentEvent`` per call, before the tool runs;
    ``remove_extra_arguments=False`` leaves the extra values in the arguments the tool receives.
    Extra values the model got wrong (a missing required field, a wrong type) make the call an
    arguments error (``on_arguments_error`` decides what the model reads). A field name that a tool
    already uses is a ``ValueError`` when the tools are resolved.
    """

    def __init__(
        self,
        tools: Any,
        *,
        arguments: Any,
        on_arguments: Callable[[AugmentedArgumentEvent[Any]], Any],
        remove_extra_arguments: bool = True,
    ) -> None:
        from chatclient.tools.decorator import resolve_tool_sources

        if not callable(on_arguments):
            raise TypeError(
                f"on_arguments must be a callable receiving an AugmentedArgumentEvent, not {on_arguments!r}"
            )
        _extra_schema(arguments)  # a type without fields fails here, not at the first request
        items: Iterable[Any] = tools if isinstance(tools, (list, tuple, set, frozenset)) else (tools,)
        self._direct: list[Any] = []
        self._providers: list[Any] = []
        for item in items:
            if is_tool_callback(item) or not callable(getattr(item, "tool_callbacks", None)):
                self._direct.append(item)
            else:
                self._providers.append(item)
        self._static = tuple(resolve_tool_sources(self._direct)[0]) if self._direct else ()
        self.argument_type = arguments
        self.remove_extra_arguments = remove_extra_arguments
        self._on_arguments = on_arguments
        self._wrapped: dict[int, tuple[ToolCallback, AugmentedToolCallback]] = {}

    def _wrap(self, cb: ToolCallback) -> AugmentedToolCallback:
        # The same wrapper while the tool is the same object: the loop compares tools by identity.
        known = self._wrapped.get(id(cb))
        if known is not None and known[0] is cb:
            return known[1]
        wrapped = AugmentedToolCallback(
            cb, self.argument_type, self._on_arguments, remove_extra_arguments=self.remove_extra_arguments
        )
        self._wrapped[id(cb)] = (cb, wrapped)
        return wrapped

    def tool_callbacks(
        self, request: ToolProviderRequest | None = None, reserved: frozenset[str] = frozenset()
    ) -> tuple[ToolCallback, ...]:
        """The wrapped tools (inner providers are asked with the same request)."""
        taken = set(reserved) | {cb.definition.name for cb in self._static}
        callbacks = list(self._static)
        for provider in self._providers:
            given = provider_callbacks(provider, taken, request)
            taken.update(cb.definition.name for cb in given)
            callbacks.extend(given)
        out = tuple(self._wrap(cb) for cb in callbacks)
        # Forget wrappers of tools a provider no longer offers (kept ones keep their identity).
        self._wrapped = {id(cb): self._wrapped[id(cb)] for cb in callbacks}
        return out

    def __repr__(self) -> str:
        return f"AugmentedToolCallbackProvider(arguments={getattr(self.argument_type, '__name__', self.argument_type)})"

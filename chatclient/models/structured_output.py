"""The structured-output ladder: ask for JSON the strongest way a server accepts, degrade when it refuses.

``entity(T)`` needs the model to answer with JSON matching a schema. Servers differ in how (and
whether) they let a client enforce that, so the terminal advisor walks a ladder, one rung per try:

1. ``"native"``: the provider's own schema mode (OpenAI ``response_format: {type: json_schema}``,
   Ollama ``format: <schema>``, the embedded llama.cpp model's grammar);
2. ``"json_object"``: JSON mode with the schema attached (``{"type": "json_object", "schema": ...}``,
   what llama-cpp-python's server and several compatible servers take; Ollama ``format: "json"``),
   plus the format instructions in the prompt;
3. ``"tool"``: a synthetic tool whose parameters are the schema, forced with ``tool_choice``; the
   tool call's arguments become the answer text (Anthropic's native path);
4. ``"instructions"``: the format instructions appended to the user message (works everywhere).

The rungs a model offers come from ``ModelCapabilities.structured_output``. When the server REJECTS
a rung (an HTTP 4xx/5xx whose body names ``response_format``, ``json_schema``, ``format`` ...), the
next rung is tried, once, in the same request, and the rejection is remembered per model instance
(and model name), so later requests start lower without paying for the failure again. A rung can
be pinned per request (``entity(T, mode="json_object")`` or the ``ContextKeys.STRUCTURED_OUTPUT_MODE``
context key); a pinned rung is the only one tried.

The rung used and why land in the response metadata: ``structured_output_mode`` and
``structured_output_reason`` (e.g. ``"rejected: native (OpenAI returned HTTP 500: ...)"``).
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from chatclient.errors import AuthenticationError, ModelHTTPError, RateLimitError
from chatclient.messages import ToolCall
from chatclient.models.base import ChatResponse, Generation, GenerationMetadata
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

__all__ = [
    "ANSWER_TOOL_NAME",
    "INSTRUCTIONS",
    "JSON_OBJECT",
    "MODES",
    "NATIVE",
    "RUNGS",
    "TOOL",
    "LadderPlan",
    "StructuredOutputMode",
    "ToolAnswerStream",
    "check_mode",
    "forget_rejections",
    "plan",
    "prompt_for_rung",
    "rejected_rungs",
    "rejection_reason",
    "remember_rejection",
    "tool_answer",
]

NATIVE = "native"
JSON_OBJECT = "json_object"
TOOL = "tool"
INSTRUCTIONS = "instructions"
RUNGS = (NATIVE, JSON_OBJECT, TOOL, INSTRUCTIONS)
StructuredOutputMode = Literal["auto", "native", "json_object", "tool", "instructions"]
MODES = ("auto", *RUNGS)

ANSWER_TOOL_NAME = "structured_answer"
_ANSWER_TOOL_DESCRIPTION = "Give the final answer. Its arguments ARE the answer and must match the schema."

# Words in an error body that say the server objected to the structured-output part of the request.
# ``\b`` keeps "format" from matching inside unrelated words; ``response_format`` is listed on its
# own because ``_`` is a word character.
_REJECTION_WORDS: Mapping[str, re.Pattern[str]] = {
    NATIVE: re.compile(r"response_format|json_schema|\bformat\b|\bschema\b|grammar", re.IGNORECASE),
    JSON_OBJECT: re.compile(r"response_format|json_object|\bformat\b|\bschema\b|grammar", re.IGNORECASE),
    TOOL: re.compile(r"tool_choice|\btools?\b|\bfunctions?\b", re.IGNORECASE),
}
_REASON_CHARS = 200  # characters of the server's message kept in a reason


def check_mode(mode: Any) -> str:
    """``mode`` if it names a rung or ``"auto"``; else ``ValueError`` listing the valid names."""
    if mode not in MODES:
        raise ValueError(f"unknown structured-output mode {mode!r}; use one of {', '.join(map(repr, MODES))}")
    return str(mode)


# -- memory of rejected rungs ---------------------------------------------------------------------


class _Rejections:
    __slots__ = ("by_name", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_name: dict[str | None, dict[str, str]] = {}


# Keyed by the model object's identity (models that travel as their constructor arguments compare
# equal when configured alike, yet each remembers only its own rejections), held weakly so that a
# dropped model takes its memory with it.
_MEMORY: dict[int, tuple[weakref.ref[Any], _Rejections]] = {}
_MEMORY_LOCK = threading.RLock()  # re-entrant: a weakref callback may run inside a locked section


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    with _MEMORY_LOCK:
        entry = _MEMORY.get(key)
        if entry is not None and entry[0] is ref:
            del _MEMORY[key]


def _rejections(model: Any, create: bool) -> _Rejections | None:
    key = id(model)
    with _MEMORY_LOCK:
        entry = _MEMORY.get(key)
        if entry is not None and entry[0]() is model:
            return entry[1]
        if not create:
            return None
        try:
            ref = weakref.ref(model, functools.partial(_forget, key))
        except TypeError:  # not weak-referenceable: such a model simply does not remember
            return None
        found = _Rejections()
        _MEMORY[key] = (ref, found)
        return found


def rejected_rungs(model: Any, model_name: str | None = None) -> dict[str, str]:
    """The rungs ``model`` (serving ``model_name``) rejected before, each with the reason."""
    memory = _rejections(model, create=False)
    if memory is None:
        return {}
    with memory.lock:
        return dict(memory.by_name.get(model_name, {}))


def remember_rejection(model: Any, rung: str, reason: str, model_name: str | None = None) -> None:
    """Record that ``model`` rejected ``rung``; later plans for it skip that rung."""
    memory = _rejections(model, create=True)
    if memory is not None:
        with memory.lock:
            memory.by_name.setdefault(model_name, {})[rung] = reason


def forget_rejections(model: Any) -> None:
    """Forget every rejection ``model`` made (e.g. after the server was upgraded)."""
    memory = _rejections(model, create=False)
    if memory is not None:
        with memory.lock:
            memory.by_name.clear()


def rejection_reason(error: BaseException, rung: str) -> str | None:
    """``"rejected: <rung> (<server message>)"`` when ``error`` is a server refusing ``rung``, else None.

    Only HTTP errors count whose text names the structured-output part of the request; auth
    failures, rate limits and unrelated errors are not rejections (they propagate unchanged).
    """
    if rung not in _REJECTION_WORDS or not isinstance(error, ModelHTTPError):
        return None
    if isinstance(error, AuthenticationError | RateLimitError) or error.status is None or error.status < 400:
        return None
    text = f"{error} {error.body or ''}"
    if not _REJECTION_WORDS[rung].search(text):
        return None
    detail = " ".join(str(error).split())
    if len(detail) > _REASON_CHARS:
        detail = detail[: _REASON_CHARS - 3] + "..."
    return f"rejected: {rung} ({detail})"


# -- planning ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LadderPlan:
    """The rungs to try for one request, in order, and why the first one was chosen."""

    rungs: tuple[str, ...]
    reason: str
    pinned: bool = False
    model_name: str | None = None


def model_name_for(model: Any, prompt: Prompt) -> str | None:
    """The model name a request goes to: the prompt's option, else the model's default."""
    name = prompt.options.model if prompt.options is not None else None
    if name is None:
        defaults = getattr(model, "default_options", None)
        name = getattr(defaults, "model", None)
    return name if isinstance(name, str) else None


def plan(model: Any, prompt: Prompt, schema: Mapping[str, Any] | None, mode: str = "auto") -> LadderPlan:
    """The ladder for one request to ``model``.

    ``mode`` other than ``"auto"`` pins that rung. In auto mode the rungs are the model's
    ``capabilities.structured_output`` minus those it rejected before (and minus ``"tool"`` when the
    request offers its own tools: forcing the answer tool would stop the model from calling them),
    then ``"instructions"``. A schema whose root is not an object gets instructions only: schema
    modes (and tool parameters) want an object at the root.
    """
    name = model_name_for(model, prompt)
    if mode != "auto":
        return LadderPlan((check_mode(mode),), "pinned by the request", pinned=True, model_name=name)
    if not schema:
        return LadderPlan((INSTRUCTIONS,), "the target has no JSON schema", model_name=name)
    if schema.get("type") != "object":
        return LadderPlan((INSTRUCTIONS,), "the schema's root is not an object", model_name=name)
    caps = getattr(model, "capabilities", None)
    offered = tuple(getattr(caps, "structured_output", None) or ())
    rejected = rejected_rungs(model, name)
    rungs: list[str] = []
    notes: list[str] = []
    for rung in offered:
        if rung in rejected:
            notes.append(f"{rung} was {rejected[rung]} earlier")
        elif rung == TOOL and prompt.tools:
            notes.append("tool mode skipped: the request offers its own tools")
        else:
            rungs.append(rung)
    rungs.append(INSTRUCTIONS)
    if notes:
        reason = "; ".join(notes)
    elif offered:
        reason = "model capabilities"
    else:
        reason = "the model has no schema mode"
    return LadderPlan(tuple(rungs), reason, model_name=name)


# -- building the request for a rung ----------------------------------------------------------------


def _with_instructions(prompt: Prompt, fmt: str | None) -> Prompt:
    if not fmt:
        return prompt
    return prompt.augment_user_message(
        lambda u: type(u)(f"{u.text}\n{fmt}" if u.text else fmt, media=u.media, metadata=u.metadata)
    )


def _merge(prompt: Prompt, options: ChatOptions) -> Prompt:
    return prompt.copy(options=(prompt.options or ChatOptions()).merge(options))


def tool_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema as tool parameters (``$schema`` dropped: tool APIs want a bare object schema)."""
    return {k: v for k, v in schema.items() if k != "$schema"}


def prompt_for_rung(model: Any, prompt: Prompt, rung: str, schema: Mapping[str, Any] | None, fmt: str | None) -> Prompt:
    """``prompt`` changed to ask for structured output the ``rung`` way.

    A model may shape the options for ``"native"`` and ``"json_object"`` itself with a
    ``structured_output_options(rung, schema) -> ChatOptions`` method (OpenAI-compatible servers
    and Ollama do); without one, ``"native"`` sets ``options.output_schema``. The hook is asked for
    ``"instructions"`` too; options it returns there go along with the instructions.
    """
    if not schema:
        return _with_instructions(prompt, fmt)
    if rung == INSTRUCTIONS:
        # A model that can hold its answer to the schema without any API (the embedded model's
        # grammar) may still do so here; the others answer from the instructions alone.
        hook = getattr(model, "structured_output_options", None)
        shaped = hook(rung, schema) if callable(hook) else None
        return _with_instructions(_merge(prompt, shaped) if shaped is not None else prompt, fmt)
    if rung == TOOL:
        tool = ToolDefinition(ANSWER_TOOL_NAME, _ANSWER_TOOL_DESCRIPTION, tool_parameters(schema))
        tools = (*(t for t in prompt.tools if t.name != ANSWER_TOOL_NAME), tool)
        return _merge(prompt, ChatOptions(tool_choice=ANSWER_TOOL_NAME)).copy(tools=tools)
    hook = getattr(model, "structured_output_options", None)
    options = hook(rung, schema) if callable(hook) else None
    if options is None:
        options = ChatOptions(output_schema=schema)
    shaped = _merge(prompt, options)
    # JSON mode alone only promises *some* JSON (and OpenAI's requires the word in the prompt), so
    # the instructions with the schema go along.
    return _with_instructions(shaped, fmt) if rung == JSON_OBJECT else shaped


# -- reading the answer of the tool rung --------------------------------------------------------------


def _answer_generation(g: Generation) -> Generation:
    answer = [c for c in g.output.tool_calls if c.name == ANSWER_TOOL_NAME]
    if not answer:
        return g
    others = tuple(c for c in g.output.tool_calls if c.name != ANSWER_TOOL_NAME)
    text = "".join(c.arguments for c in answer)
    finish = g.metadata.finish_reason
    if finish == "tool_calls" and not others:
        finish = "stop"
    output = replace(g.output, text=text, tool_calls=others)
    return Generation(output, GenerationMetadata(finish, g.metadata.extra))


def tool_answer(response: ChatResponse) -> ChatResponse:
    """A whole response of the tool rung with the answer tool's arguments as the text."""
    return ChatResponse(tuple(_answer_generation(g) for g in response.generations), response.metadata)


class ToolAnswerStream:
    """Rewrites streamed chunks of the tool rung: answer-tool argument fragments become text deltas.

    Providers send a call's name with its first fragment only; later fragments carry its id (or no
    id at all, meaning "the call in progress"), so the answer call is followed by id.
    """

    __slots__ = ("_answer_ids", "_current")

    def __init__(self) -> None:
        self._answer_ids: set[str] = set()
        self._current: bool = False

    def _is_answer(self, call: ToolCall) -> bool:
        if call.name:
            self._current = call.name == ANSWER_TOOL_NAME
            if self._current and call.id:
                self._answer_ids.add(call.id)
            return self._current
        if call.id:
            return call.id in self._answer_ids
        return self._current

    def rewrite(self, chunk: ChatResponse) -> ChatResponse:
        g = chunk.result
        if g is None:
            return chunk
        calls = g.output.tool_calls
        answer = [c for c in calls if self._is_answer(c)] if calls else []
        finish = g.metadata.finish_reason
        if finish == "tool_calls" and len(answer) == len(calls) and (self._answer_ids or self._current):
            finish = "stop"
        if not answer and finish == g.metadata.finish_reason:
            return chunk
        others = tuple(c for c in calls if c not in answer)
        text = "".join(c.arguments for c in answer) if answer else g.output.text
        if answer and g.output.text:
            text = g.output.text + (text or "")
        new = Generation(replace(g.output, text=text, tool_calls=others), GenerationMetadata(finish, g.metadata.extra))
        return ChatResponse((new, *chunk.generations[1:]), chunk.metadata)

    def rewrite_all(self, chunks: Iterable[ChatResponse]) -> Iterator[ChatResponse]:
        for chunk in chunks:
            yield self.rewrite(chunk)

    async def arewrite_all(self, chunks: AsyncIterator[ChatResponse]) -> AsyncIterator[ChatResponse]:
        async for chunk in chunks:
            yield self.rewrite(chunk)

"""The fluent ChatClient: a builder of defaults, a request spec per call, and response specs.

    client = ChatClient.builder(model).default_system("You are terse.").build()
    text = client.prompt().user("Hi").call().content()

Nothing calls the model until a terminal method (``content``, ``chat_response``, ``entity``, ...)
of a response spec runs, and a response spec runs the advisor chain at most once.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Never, TypeVar, overload

from chatclient import events as _events
from chatclient import observation
from chatclient._suggest import no_such_attribute
from chatclient.advisor import Advisor, AdvisorChain, ChatModelAdvisor, Mode, build_chain
from chatclient.errors import ChatClientError, TemplateError
from chatclient.messages import MESSAGE_CLASSES, Media, Message, SystemMessage, UserMessage
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys
from chatclient.templates import TemplateRenderer, default_renderer

if TYPE_CHECKING:
    import asyncio

    from chatclient.converters import StructuredOutputConverter
    from chatclient.events import EventCallback, StreamEvent
    from chatclient.models.base import ChatModel, ChatResponse
    from chatclient.models.structured_output import StructuredOutputMode

T = TypeVar("T")


# -- argument checks (eager: a bad argument fails at the spec call, not at the model call) ---------


def _unawaited(value: Any, what: str) -> None:
    """A coroutine where a value belongs is nearly always an ``acall().content()`` nobody awaited."""
    if inspect.iscoroutine(value):
        name = getattr(value, "__qualname__", "a coroutine")
        value.close()  # it can never run now; closing it spares a second "never awaited" warning
        raise TypeError(
            f"{what} is an un-awaited coroutine ({name}), not a value: inside async code write "
            "`text = await client.prompt(...).acall().content()` and pass `text`; in blocking code use "
            "`call().content()`"
        )


def _check_text(text: Any) -> str:
    _unawaited(text, "text")
    if text is None or not isinstance(text, str) or not text.strip():
        raise ValueError("text cannot be None or empty")
    return text


def _check_mapping(mapping: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{what} must be a mapping")
    for k, v in mapping.items():
        if k is None or not isinstance(k, str) or not k.strip():
            raise ValueError(f"{what} keys cannot be None or empty")
        if v is None:
            raise ValueError(f"{what} values cannot be None (key {k!r})")
        _unawaited(v, f"{what}[{k!r}]")
    return dict(mapping)


def _check_items(items: Sequence[Any], what: str) -> list[Any]:
    for item in items:
        if item is None:
            raise ValueError(f"{what} cannot contain None")
    return list(items)


_MODEL_METHODS = ("call", "stream", "acall", "astream")


def _check_model(model: Any, where: str) -> None:
    """Reject what is not a chat model where it is passed, saying how to make one."""
    if model is None:
        raise ValueError(f"{where} needs a chat model, got None")
    if isinstance(model, str):
        raise TypeError(
            f"{where} needs a chat model object, not the string {model!r}. Build the model first, e.g. "
            f"{where}(OpenAIChatModel({model!r})) with `from chatclient.models.openai import OpenAIChatModel` "
            "(likewise AnthropicChatModel, OllamaChatModel, LlamaCppChatModel)."
        )
    if isinstance(model, type):
        raise TypeError(
            f"{where} needs a chat model instance, not the class {model.__name__}: pass {model.__name__}(...)"
        )
    if not any(callable(getattr(model, m, None)) for m in _MODEL_METHODS):
        raise TypeError(
            f"{where} needs a chat model (an object with call/stream/acall/astream, e.g. OpenAIChatModel(...) or "
            f"ScriptedChatModel([...])), got {type(model).__name__}"
        )


_ADVISOR_METHODS = ("advise_call", "advise_stream", "advise_acall", "advise_astream")


def _check_advisor(advisor: Any) -> Advisor:
    if advisor is None:
        raise ValueError("advisors cannot contain None")
    if isinstance(advisor, type):
        if any(callable(getattr(advisor, m, None)) for m in _ADVISOR_METHODS):
            name = advisor.__name__
            raise TypeError(f"advisors need instances: pass {name}(), not the class {name}")
        raise TypeError(f"{advisor.__name__} is a class, not an advisor; advisors extend BaseAdvisor or CallAdvisor")
    if not any(callable(getattr(advisor, m, None)) for m in _ADVISOR_METHODS):
        kind = type(advisor).__name__
        what = f"the function {advisor.__name__}()" if inspect.isroutine(advisor) else f"an object of type {kind}"
        raise TypeError(
            f"advisors got {what}, which is not an advisor: an advisor extends BaseAdvisor (before/after) or "
            "CallAdvisor/StreamAdvisor (advise_call/advise_stream); @tool functions go to .tools(...)"
        )
    return advisor  # type: ignore[no-any-return]


def _check_tool(item: Any) -> None:
    """Reject what cannot be a tool at the .tools()/.default_tools() call, not at the model call."""
    from chatclient.tools import resolve_tools
    from chatclient.tools.callback import is_tool_callback, is_tool_callback_provider
    from chatclient.tools.decorator import tool_spec

    if item is None:
        raise ValueError("tools cannot contain None")
    if isinstance(item, (list, tuple, set, frozenset)):
        for sub in item:
            _check_tool(sub)
        return
    if is_tool_callback(item) or (tool_spec(item) is not None and not isinstance(item, type)):
        return  # the common cases, accepted without building a callback twice
    if is_tool_callback_provider(item):
        return  # asked for its tools per request (an MCP server may not be connected yet)
    if isinstance(item, (str, bytes)):
        raise TypeError(
            f"tools take @tool functions, objects with @tool methods or ToolCallbacks, not the string {item!r}: "
            "pass the function itself"
        )
    if isinstance(item, (int, float, complex, bool, Mapping)):
        raise TypeError(
            f"tools take @tool functions, objects with @tool methods or ToolCallbacks, not {type(item).__name__}"
        )
    # Objects, classes and modules: resolving them now raises the same message the request would.
    resolve_tools([item])


def _check_callback(callback: Any) -> Any:
    if callback is None or not callable(callback):
        raise TypeError(f"on_event needs a callable taking one event, got {type(callback).__name__}")
    return callback


@dataclass
class _RequestState:
    """Everything a request spec (or the builder's defaults) holds."""

    user_text: str | None = None
    user_params: dict[str, Any] = field(default_factory=dict)
    user_media: list[Media] = field(default_factory=list)
    user_metadata: dict[str, Any] = field(default_factory=dict)
    system_text: str | None = None
    system_params: dict[str, Any] = field(default_factory=dict)
    system_metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    advisors: list[Advisor] = field(default_factory=list)
    advisor_params: dict[str, Any] = field(default_factory=dict)
    options: ChatOptions | None = None
    tools: list[Any] = field(default_factory=list)
    tool_context: dict[str, Any] = field(default_factory=dict)
    renderer: TemplateRenderer | None = None
    # True once params were given (even empty ones): the text is then a template and a missing
    # variable is an error, instead of "{{ name }}" reaching the model verbatim.
    system_render: bool = False
    user_render: bool = False
    on_event: list[Any] = field(default_factory=list)  # event callbacks (chatclient.events)
    max_duration: float | None = None

    def copy(self) -> _RequestState:
        # Containers are copied; their elements (immutable messages, shared advisors) are not.
        return _RequestState(
            self.user_text,
            dict(self.user_params),
            list(self.user_media),
            dict(self.user_metadata),
            self.system_text,
            dict(self.system_params),
            dict(self.system_metadata),
            list(self.messages),
            list(self.advisors),
            dict(self.advisor_params),
            self.options,
            list(self.tools),
            dict(self.tool_context),
            self.renderer,
            self.system_render,
            self.user_render,
            on_event=list(self.on_event),
            max_duration=self.max_duration,
        )

    # setters shared by the builder and the request spec

    def set_system(
        self, text: str | None, params: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None
    ) -> None:
        if text is not None:
            self.system_text = _check_text(text)
        elif params is None and metadata is None:
            raise ValueError("text cannot be None or empty")
        self.system_params.update(_check_mapping(params, "params"))
        self.system_render = self.system_render or params is not None
        self.system_metadata.update(_check_mapping(metadata, "metadata"))

    def set_user(
        self,
        text: str | None,
        params: Mapping[str, Any] | None,
        media: Sequence[Media] | None,
        metadata: Mapping[str, Any] | None,
    ) -> None:
        if text is not None:
            self.user_text = _check_text(text)
        elif params is None and metadata is None and not media:
            raise ValueError("text cannot be None or empty")
        self.user_params.update(_check_mapping(params, "params"))
        self.user_render = self.user_render or params is not None
        self.user_metadata.update(_check_mapping(metadata, "metadata"))
        if media is not None:
            for m in _check_items(media, "media"):
                if not isinstance(m, Media):
                    raise TypeError(f"media must be Media objects, got {type(m).__name__}")
                self.user_media.append(m)

    def add_advisors(self, advisors: Sequence[Advisor | Sequence[Advisor]], params: Mapping[str, Any] | None) -> None:
        if advisors is None:
            raise ValueError("advisors cannot be None")
        for a in advisors:
            # A list passed as one argument (Spring's advisors(List)) is accepted like separate arguments.
            group = a if isinstance(a, (list, tuple)) else (a,)
            self.advisors.extend(_check_advisor(item) for item in group)
        if params is not None:
            if not isinstance(params, Mapping):
                raise TypeError("params must be a mapping")
            for k in params:
                if k is None or not isinstance(k, str) or not k.strip():
                    raise ValueError("params keys cannot be None or empty")
            self.advisor_params.update(params)

    def add_messages(self, messages: Sequence[Message]) -> None:
        for m in _check_items(messages, "messages"):
            if not isinstance(m, MESSAGE_CLASSES):
                raise TypeError(f"messages must be Message objects, got {type(m).__name__}")
            self.messages.append(m)

    def set_options(self, options: ChatOptions) -> None:
        if options is None:
            raise ValueError("options cannot be None")
        if not isinstance(options, ChatOptions):
            hint = " (build one: ChatOptions(**your_dict))" if isinstance(options, Mapping) else ""
            raise TypeError(f"options must be a ChatOptions, got {type(options).__name__}{hint}")
        self.options = options

    def add_tools(self, tools: Sequence[Any]) -> None:
        for item in tools:
            _check_tool(item)
        self.tools.extend(tools)

    def add_tool_context(self, context: Mapping[str, Any]) -> None:
        if context is None:
            raise ValueError("tool_context cannot be None")
        self.tool_context.update(_check_mapping(context, "tool_context"))

    def set_renderer(self, renderer: TemplateRenderer) -> None:
        if renderer is None:
            raise ValueError("template_renderer cannot be None")
        if not callable(getattr(renderer, "render", None)):
            raise TypeError("template_renderer must have a render(template, variables) method")
        self.renderer = renderer


def _render(text: str, params: Mapping[str, Any], renderer: TemplateRenderer | None, explicit: bool) -> str:
    # Text is a template only when params were given (an empty mapping counts: it says "render, and
    # fail on a missing variable"); without params, braces are sent verbatim.
    if not params and not explicit:
        return text
    return (renderer or default_renderer()).render(text, params)


def _render_part(
    part: str, text: str, params: Mapping[str, Any], renderer: TemplateRenderer | None, explicit: bool
) -> str:
    try:
        return _render(text, params, renderer, explicit)
    except TemplateError as exc:
        if not exc.missing:
            raise
        # Say which text failed and how to fix it; the renderer only knows the template.
        names = ", ".join(f"{n!r}: ..." for n in exc.missing)
        raise TemplateError(
            f"The {part} text {_excerpt(text)} uses {', '.join(exc.missing)} but params do not give "
            f"{'it' if len(exc.missing) == 1 else 'them'}: pass params={{{names}}} with the {part} text.",
            exc.missing,
        ) from None


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _last_user_text(messages: Sequence[Message]) -> str | None:
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            return m.text
    return None


def _to_request(state: _RequestState) -> tuple[ChatClientRequest, list[Advisor]]:
    """Assemble the request (system, messages, user) and the advisor list from the spec."""
    messages: list[Message] = []
    if state.system_text:
        messages.append(
            SystemMessage(
                _render_part("system", state.system_text, state.system_params, state.renderer, state.system_render),
                state.system_metadata,
            )
        )
    messages.extend(state.messages)
    if state.user_text or state.user_media:
        text = (
            _render_part("user", state.user_text, state.user_params, state.renderer, state.user_render)
            if state.user_text
            else ""
        )
        messages.append(UserMessage(text, tuple(state.user_media), state.user_metadata))
    if not messages:
        raise ValueError("the prompt is empty: give user text (prompt('...') or .user('...')) or messages")
    context = dict(state.advisor_params)
    question = _last_user_text(messages)
    if question is not None:
        context[ContextKeys.USER_QUESTION] = question
    # One sink per request (a response spec runs its request once): building it here costs no extra
    # context copy at run time. Runs that nobody listens to only collect advisors' few events.
    context[ContextKeys.EVENTS] = _events.EventSink(state.on_event)
    if state.max_duration is not None:
        context[ContextKeys.MAX_DURATION] = state.max_duration
    advisors = state.advisors
    tool_definitions: tuple[Any, ...] = ()
    if state.tools:
        from chatclient.tools import ToolCallAdvisor
        from chatclient.tools.decorator import resolve_tool_sources
        from chatclient.tools.providers import ToolProviderRequest

        asked = ToolProviderRequest(tuple(messages), context, dict(state.tool_context))
        callbacks, provided = resolve_tool_sources(state.tools, asked)
        if provided:
            context[ContextKeys.TOOL_PROVIDERS] = provided
        tool_definitions = tuple(cb.definition for cb in callbacks)
        context[ContextKeys.TOOL_CALLBACKS] = tuple(callbacks)
        context[ContextKeys.TOOL_CONTEXT] = dict(state.tool_context)
        if not any(isinstance(a, ToolCallAdvisor) for a in advisors):
            advisors = [*advisors, ToolCallAdvisor()]
    elif state.tool_context:
        context[ContextKeys.TOOL_CONTEXT] = dict(state.tool_context)
    prompt = Prompt(messages, state.options, tools=tool_definitions)
    return ChatClientRequest(prompt, context), advisors


class ChatClient:
    """A configured entry point for talking to one model. Thread-safe: build once, use everywhere.

    >>> from chatclient.testing import ScriptedChatModel
    >>> client = ChatClient.create(ScriptedChatModel(["Hello!"]))
    >>> client.prompt("Hi").call().content()
    'Hello!'
    """

    __slots__ = ("_defaults", "_model")

    def __init__(self, model: ChatModel, defaults: _RequestState | None = None) -> None:
        _check_model(model, "ChatClient.create")
        self._model = model
        self._defaults = defaults or _RequestState()

    @property
    def model(self) -> ChatModel:
        return self._model

    @staticmethod
    def create(model: ChatModel) -> ChatClient:
        """A client with no defaults. ``model`` is a model object (``OpenAIChatModel("gpt-4o-mini")``), not a name."""
        return ChatClient(model)

    @staticmethod
    def builder(model: ChatModel) -> ChatClientBuilder:
        """A builder for a client with default system text, advisors, options and tools."""
        return ChatClientBuilder(model)

    def mutate(self) -> ChatClientBuilder:
        """A builder starting from a copy of this client's defaults; changing it never changes this client."""
        return ChatClientBuilder(self._model, self._defaults.copy())

    @overload
    def prompt(self) -> ChatClientRequestSpec: ...
    @overload
    def prompt(self, content: str | Prompt) -> ChatClientRequestSpec: ...

    def prompt(self, content: str | Prompt | None = None) -> ChatClientRequestSpec:
        """Start a request from the client's defaults, optionally with user text or a whole Prompt."""
        state = self._defaults.copy()
        if content is not None:
            if isinstance(content, Prompt):
                if content.options is not None:
                    state.options = content.options
                state.add_messages(content.messages)
                if content.tools:
                    raise ValueError("give tools with .tools(...), not inside the Prompt")
            else:
                state.messages.append(UserMessage(_check_text(content)))
        return ChatClientRequestSpec(self._model, state)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise no_such_attribute(self, name, _CLIENT_HINTS)


_CLIENT_HINTS = {
    "call": "start a request first: client.prompt(\"question\").call().content()",
    "chat": "requests start with client.prompt(\"question\"), then .call() / .stream()",
    "invoke": "requests start with client.prompt(\"question\"), then .call() / .stream()",
    "system": "per-request system text goes on the request: client.prompt().system(...); defaults on "
    "ChatClient.builder(model).default_system(...)",
    "advisors": "per-request advisors go on the request: client.prompt(...).advisors(...); defaults on "
    "ChatClient.builder(model).default_advisors(...)",
}
_BUILDER_HINTS = {
    "system": "the builder sets defaults for every request: .default_system(...); a single request's system "
    "text goes on client.prompt().system(...)",
    "user": "the builder sets defaults: .default_user(...); a single request's text goes on client.prompt(...)",
    "advisors": "the builder sets defaults: .default_advisors(...)",
    "tools": "the builder sets defaults: .default_tools(...)",
    "options": "the builder sets defaults: .default_options(ChatOptions(...))",
    "prompt": "build the client first: ChatClient.builder(model)....build().prompt(...)",
    "call": "build the client first: ChatClient.builder(model)....build().prompt(...).call()",
}
_SPEC_HINTS = {
    "content": "run the request first: .call().content() (or .stream().content() for pieces)",
    "entity": "run the request first: .call().entity(MyType)",
    "temperature": "options go in one object: .options(ChatOptions(temperature=...))",
    "model": "the model is the client's: ChatClient.create(model); per-request model options: "
    ".options(ChatOptions(model=...))",
}


def _no_terminal_arguments(method: str, args: tuple[Any, ...], options: Mapping[str, Any]) -> None:
    """``call()`` and its siblings take nothing: say where what was passed belongs."""
    if not args and not options:
        return
    fields = {name for name in dir(ChatOptions) if not name.startswith("_")}
    as_options = [k for k in options if k in fields]
    parts = [f"{method}() takes no arguments"]
    if as_options:
        shown = ", ".join(f"{k}={options[k]!r}" for k in as_options)
        parts.append(f"set model options before it: .options(ChatOptions({shown})).{method}()")
    unknown = [k for k in options if k not in fields]
    if unknown:
        parts.append(
            f"{', '.join(map(repr, unknown))} is not a model option; the request is built with "
            ".system(), .user(), .messages(), .options(ChatOptions(...)), .advisors(), .tools(), .tool_context()"
        )
    if args:
        parts.append(f"the question goes in .prompt(...) or .user(...), then .{method}()")
    raise TypeError("; ".join(parts))


class ChatClientBuilder:
    """Collects a client's defaults; every method returns the builder."""

    __slots__ = ("_model", "_state")

    def __init__(self, model: ChatModel, state: _RequestState | None = None) -> None:
        _check_model(model, "ChatClient.builder")
        self._model = model
        self._state = state or _RequestState()

    def default_system(
        self,
        text: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatClientBuilder:
        """Default system text. With ``params`` (even ``{}``) it is a template and a missing variable raises
        ``TemplateError``; without them it is sent verbatim."""
        self._state.set_system(text, params, metadata)
        return self

    def default_user(
        self,
        text: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        media: Sequence[Media] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatClientBuilder:
        """Default user text, rendered like ``default_system`` (a template only when ``params`` are given)."""
        self._state.set_user(text, params, media, metadata)
        return self

    def default_advisors(
        self, *advisors: Advisor | Sequence[Advisor], params: Mapping[str, Any] | None = None
    ) -> ChatClientBuilder:
        """Advisors for every request (instances; a list as one argument is accepted); ``params`` go to the context."""
        self._state.add_advisors(advisors, params)
        return self

    def default_options(self, options: ChatOptions) -> ChatClientBuilder:
        """Options for every request (a request's ``options(...)`` replaces them)."""
        self._state.set_options(options)
        return self

    def default_tools(self, *tools: Any) -> ChatClientBuilder:
        """Tools for every request; something that is not a tool raises ``TypeError`` here."""
        self._state.add_tools(tools)
        return self

    def default_tool_context(self, context: Mapping[str, Any]) -> ChatClientBuilder:
        self._state.add_tool_context(context)
        return self

    def default_on_event(self, callback: EventCallback) -> ChatClientBuilder:
        """Call ``callback(event)`` (sync or async) with every event of every request (see ``chatclient.events``)."""
        self._state.on_event.append(_check_callback(callback))
        return self

    def default_template_renderer(self, renderer: TemplateRenderer) -> ChatClientBuilder:
        self._state.set_renderer(renderer)
        return self

    def build(self) -> ChatClient:
        """A new client; later changes to this builder do not affect it."""
        return ChatClient(self._model, self._state.copy())

    def clone(self) -> ChatClientBuilder:
        return ChatClientBuilder(self._model, self._state.copy())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise no_such_attribute(self, name, _BUILDER_HINTS)


ChatClient.Builder = ChatClientBuilder  # type: ignore[attr-defined]  # Spring-style name


class ChatClientRequestSpec:
    """One request being built. Every method returns the spec; a terminal family runs it."""

    __slots__ = ("_model", "_state")

    def __init__(self, model: ChatModel, state: _RequestState) -> None:
        self._model = model
        self._state = state

    def system(
        self,
        text: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatClientRequestSpec:
        """Set the system text (replaces); params and metadata merge."""
        self._state.set_system(text, params, metadata)
        return self

    def user(
        self,
        text: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        media: Sequence[Media] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatClientRequestSpec:
        """Set the user text (replaces); params and metadata merge; media append."""
        self._state.set_user(text, params, media, metadata)
        return self

    def messages(self, *messages: Message) -> ChatClientRequestSpec:
        """Append messages (sent after the system text and before the user text)."""
        self._state.add_messages(messages)
        return self

    def advisors(
        self, *advisors: Advisor | Sequence[Advisor], params: Mapping[str, Any] | None = None
    ) -> ChatClientRequestSpec:
        """Append advisors; ``params`` merge into the request context."""
        self._state.add_advisors(advisors, params)
        return self

    def options(self, options: ChatOptions) -> ChatClientRequestSpec:
        """Replace the options."""
        self._state.set_options(options)
        return self

    def tools(self, *tools: Any) -> ChatClientRequestSpec:
        """Offer tools: ``@tool`` functions, objects with ``@tool`` methods, or ``ToolCallback``s."""
        self._state.add_tools(tools)
        return self

    def tool_context(self, context: Mapping[str, Any]) -> ChatClientRequestSpec:
        """Merge values passed to tools that take a ``ToolContext`` (never sent to the model)."""
        self._state.add_tool_context(context)
        return self

    def on_event(self, callback: EventCallback) -> ChatClientRequestSpec:
        """Call ``callback(event)`` (sync or async) with every event of this request, in every mode.

        Advisors' events (documents retrieved, tool calls, retries) arrive as they happen; call
        modes end with ``UsageUpdate`` and ``Finished``; ``events()`` streams also pass their text
        deltas. Async callbacks are awaited before ``acall()`` returns.
        """
        self._state.on_event.append(_check_callback(callback))
        return self

    def max_duration(self, seconds: float) -> ChatClientRequestSpec:
        """Stop the whole request (tool loop and re-asks included) after ``seconds``.

        Past the deadline the request raises ``DeadlineExceededError``. Async modes cancel the
        work in flight at the deadline; sync modes check it before every advisor, model call and
        stream chunk (a blocking model call is not interrupted; its HTTP timeout still applies).
        """
        from chatclient.events import check_max_duration

        self._state.max_duration = check_max_duration(seconds)
        return self

    def template_renderer(self, renderer: TemplateRenderer) -> ChatClientRequestSpec:
        self._state.set_renderer(renderer)
        return self

    def resume(self, pending: Any, decisions: Any) -> ChatClientRequestSpec:
        """Continue a request that ``ToolApprovalAdvisor`` paused, with a person's decisions.

        ``pending`` is the ``PendingToolCalls`` of the paused answer (possibly loaded in another
        process); ``decisions`` maps each pending call id to an ``ApprovalDecision`` (or lists them
        in the order of ``pending.calls``). The spec must offer the same tools (``.tools(...)``).
        Only the calls that were pending run, as stored; a mismatch raises ``ToolApprovalError``
        (see ``chatclient.tools.approval``).
        The paused conversation replaces the spec's messages and user text; the decided calls run
        first, then the model continues. A ``ToolApprovalAdvisor`` is added when none is present.
        """
        from chatclient.tools.approval import RESUME_PENDING, RESUME_TOOL_CALLS, PendingToolCalls, ToolApprovalAdvisor

        if not isinstance(pending, PendingToolCalls):
            raise TypeError(f"resume() needs the PendingToolCalls of a paused response, got {type(pending).__name__}")
        if not self._state.tools:
            raise ValueError("resume() needs the tools of the paused request: call .tools(...) on this spec")
        decided = pending.resolve(decisions)
        history = list(pending.messages[:-1])
        if self._state.system_text:
            history = [m for m in history if not isinstance(m, SystemMessage)]
        self._state.user_text = None
        self._state.user_media = []
        self._state.messages = []
        self._state.add_messages(history)
        self._state.advisor_params[RESUME_TOOL_CALLS] = decided
        self._state.advisor_params[RESUME_PENDING] = pending
        if not any(isinstance(a, ToolApprovalAdvisor) for a in self._state.advisors):
            self._state.advisors.append(ToolApprovalAdvisor())
        return self

    def mutate(self) -> ChatClientBuilder:
        """A builder whose defaults are this spec's state."""
        return ChatClientBuilder(self._model, self._state.copy())

    def to_request(self) -> ChatClientRequest:
        """The request this spec would send (for inspection and tests)."""
        return _to_request(self._state)[0]

    # -- terminal families ----------------------------------------------------------------------

    def call(self, *_: Never, **options: Never) -> CallResponseSpec:
        _no_terminal_arguments("call", _, options)
        return CallResponseSpec(self._model, *_to_request(self._state))

    def stream(self, *_: Never, **options: Never) -> StreamResponseSpec:
        _no_terminal_arguments("stream", _, options)
        return StreamResponseSpec(self._model, *_to_request(self._state))

    def acall(self, *_: Never, **options: Never) -> AsyncCallResponseSpec:
        _no_terminal_arguments("acall", _, options)
        return AsyncCallResponseSpec(self._model, *_to_request(self._state))

    def astream(self, *_: Never, **options: Never) -> AsyncStreamResponseSpec:
        _no_terminal_arguments("astream", _, options)
        return AsyncStreamResponseSpec(self._model, *_to_request(self._state))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise no_such_attribute(self, name, _SPEC_HINTS)


@dataclass(frozen=True, slots=True)
class ResponseEntity(Generic[T]):
    """A converted entity together with the full response it came from."""

    response: ChatResponse | None
    entity: T | None


def _content(cr: ChatClientResponse) -> str | None:
    r = cr.chat_response
    if r is None or r.result is None:
        return None
    return r.result.output.text


def _converter(target: Any) -> StructuredOutputConverter[Any]:
    if target is None:
        raise ValueError("type cannot be None")
    from chatclient.converters import converter_for

    return converter_for(target)


def structured_output_context(
    converter: StructuredOutputConverter[Any], context: Mapping[str, Any], mode: str | None = None
) -> dict[str, Any]:
    """Context entries that ask the terminal advisor for this converter's format (``mode`` pins a rung)."""
    extra: dict[str, Any] = {}
    fmt = converter.format
    if fmt:
        extra[ContextKeys.OUTPUT_FORMAT] = fmt
    schema = getattr(converter, "json_schema", None)
    if schema:
        extra[ContextKeys.OUTPUT_SCHEMA] = schema
    if mode is not None:
        extra[ContextKeys.STRUCTURED_OUTPUT_MODE] = mode
    return extra


def _check_mode(mode: Any) -> str | None:
    if mode is None:
        return None
    from chatclient.models.structured_output import check_mode

    return check_mode(mode)


def _explained_stream(
    items: Iterator[Any], seen: Any, converter: StructuredOutputConverter[Any], max_tokens: int | None
) -> Iterator[Any]:
    """Pass partial entities through; a conversion failure at the end says why (cut off, refused...)."""
    from chatclient.converters.core import explained_error
    from chatclient.errors import OutputConversionError, RefusalError

    target = getattr(converter, "target", converter)
    try:
        yield from items
    except OutputConversionError as exc:
        whole = seen.result()
        refusal = whole.result.output.refusal if whole.result is not None else None
        if refusal and not isinstance(exc, RefusalError):
            raise RefusalError(refusal, target=target) from exc
        raise explained_error(exc, whole, target, max_tokens=max_tokens) from exc


async def _aexplained_stream(
    items: AsyncIterator[Any], seen: Any, converter: StructuredOutputConverter[Any], max_tokens: int | None
) -> AsyncIterator[Any]:
    from chatclient.converters.core import explained_error
    from chatclient.errors import OutputConversionError, RefusalError

    target = getattr(converter, "target", converter)
    try:
        async for item in items:
            yield item
    except OutputConversionError as exc:
        whole = seen.result()
        refusal = whole.result.output.refusal if whole.result is not None else None
        if refusal and not isinstance(exc, RefusalError):
            raise RefusalError(refusal, target=target) from exc
        raise explained_error(exc, whole, target, max_tokens=max_tokens) from exc


class _EntityStream(Iterator[T]):
    """What ``stream().entity(T)`` returns: an iterator of ever more complete ``T`` objects.

    It is not a ``T`` itself; an attribute it lacks (``.name`` for a ``Person``) gets an error that
    says so and what to do instead, rather than Python's ``'generator' object has no attribute``.
    """

    __slots__ = ("_items", "_target")

    def __init__(self, items: Iterator[T], target: Any) -> None:
        self._items = items
        self._target = target

    def __iter__(self) -> _EntityStream[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)

    def close(self) -> None:
        """Stop the stream early (closes the model's response)."""
        close = getattr(self._items, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(_entity_stream_hint(self._target, name, "stream", "for p in", "spec.call()"))


class _AsyncEntityStream(AsyncIterator[T]):
    """What ``astream().entity(T)`` returns: an async iterator of ever more complete ``T`` objects."""

    __slots__ = ("_items", "_target")

    def __init__(self, items: AsyncIterator[T], target: Any) -> None:
        self._items = items
        self._target = target

    def __aiter__(self) -> _AsyncEntityStream[T]:
        return self

    async def __anext__(self) -> T:
        return await self._items.__anext__()

    async def aclose(self) -> None:
        """Stop the stream early (closes the model's response)."""
        aclose = getattr(self._items, "aclose", None)
        if aclose is not None:
            await aclose()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(_entity_stream_hint(self._target, name, "astream", "async for p in", "await spec.acall()"))


def _entity_stream_hint(target: Any, name: str, mode: str, loop: str, single: str) -> str:
    shown = getattr(target, "__name__", None) or type(target).__name__
    return (
        f"{mode}().entity({shown}) is a stream of partial {shown} objects, not one {shown}, so it has no "
        f"attribute {name!r}: iterate it (`{loop} spec.{mode}().entity({shown}): ...`; the last item is the "
        f"whole, validated object), or use `{single}.entity({shown})` for a single object"
    )


class _ResponseSpecBase:
    __slots__ = ("_advisors", "_format", "_model", "_request", "_result")

    def __init__(self, model: ChatModel, request: ChatClientRequest, advisors: list[Advisor]) -> None:
        self._model = model
        self._request = request
        self._advisors = advisors
        self._result: Any = None
        self._format: tuple[str, str | None] | None = None  # (format, pinned mode) of the run, if any

    @property
    def request(self) -> ChatClientRequest:
        return self._request

    def _chain(self, mode: Mode) -> AdvisorChain:
        return build_chain(self._advisors, ChatModelAdvisor(self._model), mode)

    def _request_for(
        self, converter: StructuredOutputConverter[Any] | None, mode: str | None = None
    ) -> ChatClientRequest:
        """The request to run, checking that a cached result can serve this terminal method."""
        key = (converter.format, mode) if converter is not None else None
        if self._result is not None:
            if key is not None and key != self._format:
                raise ChatClientError(
                    "This response spec already called the model without this output format; use "
                    "response_entity(T) to get the response and the entity from one call."
                )
            return self._request
        self._format = key
        if converter is None:
            return self._request
        return self._request.mutate(context=structured_output_context(converter, self._request.context, mode))

    def _reusing(self, converter: StructuredOutputConverter[Any], mode: str | None) -> bool:
        """True when the model already answered without this converter's format (e.g. chat_response() ran)."""
        return self._result is not None and (converter.format, mode) != self._format

    def _max_tokens(self) -> int | None:
        """The token limit the request ran with, when known (to explain a cut-off answer)."""
        options = self._request.prompt.options
        limit = options.max_tokens if options is not None else None
        if limit is None:
            limit = getattr(getattr(self._model, "default_options", None), "max_tokens", None)
        return limit if isinstance(limit, int) else None

    def _convert(self, converter: StructuredOutputConverter[Any], cr: ChatClientResponse) -> Any:
        from chatclient.converters.core import explain_conversion

        return explain_conversion(converter, cr.chat_response, max_tokens=self._max_tokens())

    def _convert_reused(self, converter: StructuredOutputConverter[Any], target: Any) -> Any:
        """Convert the answer of an earlier run made without the format, or say how to ask for both."""
        from chatclient.converters import type_name
        from chatclient.errors import OutputConversionError, RefusalError

        try:
            return self._convert(converter, self._result)
        except RefusalError:
            raise
        except OutputConversionError as exc:
            name = type_name(getattr(converter, "target", target))
            raise ChatClientError(
                f"This response spec already called the model without asking for {name} (chat_response() or "
                f"content() ran first) and that answer is not a valid {name}; call response_entity({name}) "
                "instead to get the response and the entity from one model call."
            ) from exc


class CallResponseSpec(_ResponseSpecBase):
    """Terminal methods of a blocking call; the chain runs once and later methods reuse the result."""

    __slots__ = ()

    def _run(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None
    ) -> ChatClientResponse:
        request = self._request_for(converter, mode)
        if self._result is None:
            chain = self._chain("call")
            request, sink = _events.attach(request, always=True)
            if observation._observer is None:
                self._result = _events.finish_call(sink, chain.next_call(request))
            else:
                obs = observation._observer.start_call("call", request, self._model)
                _events.observe(sink, obs)
                try:
                    self._result = _events.finish_call(sink, chain.next_call(request))
                except BaseException as exc:
                    obs.finish(error=exc)
                    raise
                obs.finish(self._result)
        return self._result  # type: ignore[no-any-return]

    def chat_client_response(self) -> ChatClientResponse:
        return self._run()

    def chat_response(self) -> ChatResponse | None:
        return self._run().chat_response

    def content(self) -> str | None:
        return _content(self._run())

    @overload
    def entity(self, target: type[T], *, mode: StructuredOutputMode | None = None) -> T | None: ...
    @overload
    def entity(self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None) -> T | None: ...
    @overload
    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Any: ...

    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Any:
        """Convert the answer to ``target``; the model is asked for its JSON schema.

        ``mode`` pins how (``"native"``, ``"json_object"``, ``"tool"``, ``"instructions"``); by default
        the structured-output ladder picks the strongest way the model supports. Failures raise
        ``OutputConversionError`` saying why (cut off by max_tokens, empty, not JSON) or
        ``RefusalError`` when the model refused. After ``chat_response()``/``content()`` on this
        spec, the answer already received is converted if it fits ``target``.
        """
        converter = _converter(target)
        pinned = _check_mode(mode)
        if self._reusing(converter, pinned):
            return self._convert_reused(converter, target)
        return self._convert(converter, self._run(converter, pinned))

    @overload
    def response_entity(self, target: type[T], *, mode: StructuredOutputMode | None = None) -> ResponseEntity[T]: ...
    @overload
    def response_entity(
        self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None
    ) -> ResponseEntity[T]: ...
    @overload
    def response_entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> ResponseEntity[Any]: ...

    def response_entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> ResponseEntity[Any]:
        """The whole response and the converted entity, from one model call (``mode`` as in ``entity``)."""
        converter = _converter(target)
        pinned = _check_mode(mode)
        if self._reusing(converter, pinned):
            return ResponseEntity(self._result.chat_response, self._convert_reused(converter, target))
        cr = self._run(converter, pinned)
        return ResponseEntity(cr.chat_response, self._convert(converter, cr))


class AsyncCallResponseSpec(_ResponseSpecBase):
    """Async twin of ``CallResponseSpec``: every terminal method is a coroutine."""

    __slots__ = ("_lock",)

    def __init__(self, model: ChatModel, request: ChatClientRequest, advisors: list[Advisor]) -> None:
        super().__init__(model, request, advisors)
        self._lock: asyncio.Lock | None = None

    async def _run(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None
    ) -> ChatClientResponse:
        request = self._request_for(converter, mode)
        if self._result is None:
            if self._lock is None:
                import asyncio

                self._lock = asyncio.Lock()
            async with self._lock:
                if self._result is None:
                    chain = self._chain("acall")
                    request, sink = _events.attach(request, always=True, async_mode=True)
                    try:
                        if observation._observer is None:
                            result = await _events.within_deadline(chain.next_acall(request), request)
                            result = _events.finish_call(sink, result)
                        else:
                            obs = observation._observer.start_call("acall", request, self._model)
                            _events.observe(sink, obs)
                            try:
                                result = await _events.within_deadline(chain.next_acall(request), request)
                                result = _events.finish_call(sink, result)
                            except BaseException as exc:
                                obs.finish(error=exc)
                                raise
                            obs.finish(result)
                        if sink is not None:
                            await sink.settle()
                    except BaseException:
                        if sink is not None:
                            sink.cancel()
                        raise
                    self._result = result
        return self._result  # type: ignore[no-any-return]

    async def chat_client_response(self) -> ChatClientResponse:
        return await self._run()

    async def chat_response(self) -> ChatResponse | None:
        return (await self._run()).chat_response

    async def content(self) -> str | None:
        return _content(await self._run())

    @overload
    async def entity(self, target: type[T], *, mode: StructuredOutputMode | None = None) -> T | None: ...
    @overload
    async def entity(
        self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None
    ) -> T | None: ...
    @overload
    async def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Any: ...

    async def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Any:
        """Async ``CallResponseSpec.entity``."""
        converter = _converter(target)
        pinned = _check_mode(mode)
        if self._reusing(converter, pinned):
            return self._convert_reused(converter, target)
        return self._convert(converter, await self._run(converter, pinned))

    @overload
    async def response_entity(
        self, target: type[T], *, mode: StructuredOutputMode | None = None
    ) -> ResponseEntity[T]: ...
    @overload
    async def response_entity(
        self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None
    ) -> ResponseEntity[T]: ...
    @overload
    async def response_entity(
        self, target: Any, *, mode: StructuredOutputMode | None = None
    ) -> ResponseEntity[Any]: ...

    async def response_entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> ResponseEntity[Any]:
        """Async ``CallResponseSpec.response_entity``."""
        converter = _converter(target)
        pinned = _check_mode(mode)
        if self._reusing(converter, pinned):
            return ResponseEntity(self._result.chat_response, self._convert_reused(converter, target))
        cr = await self._run(converter, pinned)
        return ResponseEntity(cr.chat_response, self._convert(converter, cr))


def _consumed_error() -> ChatClientError:
    return ChatClientError(
        "This stream was already consumed; a stream runs the model once. Start a new request with prompt()."
    )


class StreamResponseSpec(_ResponseSpecBase):
    """Terminal methods of a blocking stream; the stream can be consumed once."""

    __slots__ = ()

    def _open(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None
    ) -> Iterator[ChatClientResponse]:
        return self._start(converter, mode)[0]

    def _start(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None, buffered: bool = False
    ) -> tuple[Iterator[ChatClientResponse], _events.EventSink | None]:
        if self._result is not None:
            raise _consumed_error()
        request = self._request_for(converter, mode)
        self._result = True
        chain = self._chain("stream")
        request, sink = _events.attach(request, buffered=buffered)
        if observation._observer is None:
            chunks = chain.next_stream(request)
        else:
            obs = observation._observer.start_call("stream", request, self._model)
            _events.observe(sink, obs)
            chunks = observation.observe_response_stream(obs, chain.next_stream(request))
        deadline = request.context.get(ContextKeys.DEADLINE)
        if deadline is not None:
            chunks = _events.deadline_stream(chunks, deadline)
        return chunks, sink

    def events(self) -> Iterator[StreamEvent]:
        """The request's typed events in order (``chatclient.events``): advisors' events as they are
        emitted (those emitted before the model is called come before the first token), then
        ``TextDelta`` / ``ReasoningDelta`` / ``UsageUpdate`` from the model's chunks, and a last
        ``Finished`` with the whole answer. Closing it early (``break``, ``close()``) closes the chain
        and the model's HTTP response.
        """
        chunks, sink = self._start(buffered=True)
        assert sink is not None
        return _events.stream_events(chunks, sink)

    def chat_client_response(self) -> Iterator[ChatClientResponse]:
        return self._open()

    def chat_response(self) -> Iterator[ChatResponse]:
        return (cr.chat_response for cr in self._open() if cr.chat_response is not None)

    def content(self) -> Iterator[str]:
        """The text deltas, empty ones skipped."""
        for cr in self._open():
            text = _content(cr)
            if text:
                yield text

    @overload
    def entity(self, target: type[T], *, mode: StructuredOutputMode | None = None) -> Iterator[T]: ...
    @overload
    def entity(
        self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None
    ) -> Iterator[T]: ...
    @overload
    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Iterator[Any]: ...

    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> Iterator[Any]:
        """Successively more complete partial entities as JSON arrives, then the final validated one."""
        from chatclient.converters import stream_entities
        from chatclient.models.base import ResponseAggregator

        converter = _converter(target)
        chunks = self._open(converter, _check_mode(mode))
        seen = ResponseAggregator()

        def texts() -> Iterator[str | None]:
            for cr in chunks:
                seen.add(cr.chat_response)
                yield _content(cr)

        items = _explained_stream(stream_entities(converter, texts()), seen, converter, self._max_tokens())
        return _EntityStream(items, target)


class AsyncStreamResponseSpec(_ResponseSpecBase):
    """Async twin of ``StreamResponseSpec``: every terminal method is an async iterator."""

    __slots__ = ()

    def _open(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None
    ) -> AsyncIterator[ChatClientResponse]:
        return self._start(converter, mode)[0]

    def _start(
        self, converter: StructuredOutputConverter[Any] | None = None, mode: str | None = None, buffered: bool = False
    ) -> tuple[AsyncIterator[ChatClientResponse], _events.EventSink | None]:
        if self._result is not None:
            raise _consumed_error()
        request = self._request_for(converter, mode)
        self._result = True
        chain = self._chain("astream")
        request, sink = _events.attach(request, buffered=buffered, async_mode=True)
        opened: list[Any] = []
        request = request.mutate(context={ContextKeys.ASYNC_STREAMS: opened})
        if observation._observer is None:
            chunks = chain.next_astream(request)
        else:
            obs = observation._observer.start_call("astream", request, self._model)
            _events.observe(sink, obs)
            chunks = observation.observe_async_response_stream(obs, chain.next_astream(request))
        deadline = request.context.get(ContextKeys.DEADLINE)
        if deadline is not None:
            chunks = _events.adeadline_stream(chunks, deadline)
        return _events.closing_astream(chunks, opened), sink

    def events(self) -> AsyncIterator[StreamEvent]:
        """Async ``StreamResponseSpec.events``; async ``on_event`` callbacks are awaited before
        ``Finished`` is yielded. Closing it early (``aclose()``, task cancellation) closes the chain
        and the model's HTTP response."""
        chunks, sink = self._start(buffered=True)
        assert sink is not None
        return _events.astream_events(chunks, sink)

    def chat_client_response(self) -> AsyncIterator[ChatClientResponse]:
        return self._open()

    async def chat_response(self) -> AsyncIterator[ChatResponse]:
        chunks = self._open()
        try:
            async for cr in chunks:
                if cr.chat_response is not None:
                    yield cr.chat_response
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]  # closed now, not by the loop's finalizer

    async def content(self) -> AsyncIterator[str]:
        chunks = self._open()
        try:
            async for cr in chunks:
                text = _content(cr)
                if text:
                    yield text
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]  # closed now, not by the loop's finalizer

    @overload
    def entity(self, target: type[T], *, mode: StructuredOutputMode | None = None) -> AsyncIterator[T]: ...
    @overload
    def entity(
        self, target: StructuredOutputConverter[T], *, mode: StructuredOutputMode | None = None
    ) -> AsyncIterator[T]: ...
    @overload
    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> AsyncIterator[Any]: ...

    def entity(self, target: Any, *, mode: StructuredOutputMode | None = None) -> AsyncIterator[Any]:
        """Async ``StreamResponseSpec.entity``."""
        from chatclient.converters import astream_entities
        from chatclient.models.base import ResponseAggregator

        converter = _converter(target)
        chunks = self._open(converter, _check_mode(mode))
        seen = ResponseAggregator()

        async def texts() -> AsyncIterator[str | None]:
            async for cr in chunks:
                seen.add(cr.chat_response)
                yield _content(cr)

        items = _aexplained_stream(astream_entities(converter, texts()), seen, converter, self._max_tokens())
        return _AsyncEntityStream(items, target)


__all__ = [
    "AsyncCallResponseSpec",
    "AsyncStreamResponseSpec",
    "CallResponseSpec",
    "ChatClient",
    "ChatClientBuilder",
    "ChatClientRequestSpec",
    "ResponseEntity",
    "StreamResponseSpec",
]

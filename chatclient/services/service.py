"""``ai_service``: a Protocol or abstract class becomes an object whose methods call a model.

A service is a facade over ``ChatClient``: each method call fills one ordinary request spec
(system and user text, media, tool context, conversation id) and runs it with the terminal method
its return type asks for (``content``, ``entity``, ``stream``...). Memory, retrieval, guardrails and
tools are advisors and tools added to a copy of the client when the service is built, so every
advisor works inside a service exactly as it does in a fluent call.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import datetime
import inspect
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatclient.client import ChatClient, ChatClientRequestSpec
from chatclient.errors import AiServiceDefinitionError
from chatclient.memory.base import DEFAULT_CONVERSATION_ID
from chatclient.request import ContextKeys
from chatclient.services.analysis import (
    CHAT_RESPONSE,
    CLIENT_RESPONSE,
    ENTITY,
    MISSING,
    RESULT_ENTITY,
    RESULT_TEXT,
    STREAM_TEXT,
    TEXT,
    MethodPlan,
    method_plan,
    unwrap_annotation,
)
from chatclient.services.result import result_of
from chatclient.templates import default_renderer

if TYPE_CHECKING:
    from chatclient.advisor import Advisor
    from chatclient.memory.base import ChatMemory
    from chatclient.messages import Message

T = TypeVar("T")

PLAN_ATTR = "__chatclient_service_plan__"
SERVICE_ATTR = "__chatclient_service__"
_POLL_START = 0.0005
_POLL_MAX = 0.02


# -- per-conversation serialisation ----------------------------------------------------------------


class _Slot:
    """One conversation's lock; held weakly by the registry, so idle ids cost nothing."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self, lock: Any) -> None:
        self.lock = lock


class ConversationLocks:
    """Serialises calls that share a memory id: one ``threading.Lock`` per id for every caller, plus
    one ``asyncio.Lock`` per id and event loop so that tasks of one loop queue without polling.

    An async call first takes its loop's lock, then the id's thread lock without blocking the loop
    (it polls with a short back-off, so a cancelled task never leaves the lock taken). Locks of
    idle ids are dropped (weak references), so many distinct ids do not accumulate.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._sync: weakref.WeakValueDictionary[str, _Slot] = weakref.WeakValueDictionary()
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakValueDictionary[str, _Slot]]
        self._async = weakref.WeakKeyDictionary()

    def slot(self, key: str) -> _Slot:
        with self._guard:
            slot = self._sync.get(key)
            if slot is None:
                slot = self._sync[key] = _Slot(threading.Lock())
            return slot

    def _loop_slot(self, key: str) -> _Slot | None:
        loop = asyncio.get_running_loop()
        with self._guard:
            try:
                per_loop = self._async.get(loop)
                if per_loop is None:
                    per_loop = self._async[loop] = weakref.WeakValueDictionary()
            except TypeError:  # a loop implementation without weak references: poll only
                return None
            slot = per_loop.get(key)
            if slot is None:
                slot = per_loop[key] = _Slot(asyncio.Lock())
            return slot

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the conversation ``key`` (blocking)."""
        slot = self.slot(key)
        with slot.lock:
            yield

    @contextlib.asynccontextmanager
    async def ahold(self, key: str) -> AsyncIterator[None]:
        """Hold the conversation ``key`` without blocking the event loop."""
        local = self._loop_slot(key)
        async with local.lock if local is not None else contextlib.nullcontext():
            slot = self.slot(key)
            delay = _POLL_START
            while not slot.lock.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(delay * 2, _POLL_MAX)
            try:
                yield
            finally:
                slot.lock.release()


class _ProviderMemory:
    """One ``ChatMemory`` per conversation id, made by ``memory_provider(id)`` on first use and kept."""

    def __init__(self, provider: Callable[[Any], ChatMemory]) -> None:
        self._provider = provider
        self._memories: dict[str, ChatMemory] = {}
        self._lock = threading.Lock()

    def memory(self, conversation_id: str) -> ChatMemory:
        with self._lock:
            memory = self._memories.get(conversation_id)
            if memory is None:
                memory = self._provider(conversation_id)
                if memory is None or not callable(getattr(memory, "get", None)):
                    raise TypeError(
                        f"memory_provider returned {type(memory).__name__} for conversation {conversation_id!r}; "
                        "it must return a ChatMemory (e.g. MessageWindowChatMemory())"
                    )
                self._memories[conversation_id] = memory
            return memory

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self.memory(conversation_id).add(conversation_id, messages)

    def get(self, conversation_id: str) -> list[Message]:
        return self.memory(conversation_id).get(conversation_id)

    def clear(self, conversation_id: str) -> None:
        self.memory(conversation_id).clear(conversation_id)

    def evict(self, conversation_id: str) -> None:
        with self._lock:
            memory = self._memories.pop(conversation_id, None)
        if memory is not None:
            memory.clear(conversation_id)


# -- the runtime behind the generated methods -------------------------------------------------------


class ServiceRuntime:
    """What every method of one service shares: the client (with the service's advisors and tools
    as defaults), the renderer, the memory, the system-message provider and the locks."""

    def __init__(
        self,
        interface: type,
        client: ChatClient,
        renderer: Any,
        memory: ChatMemory | None,
        system_message_provider: Callable[[Any], str | None] | None,
    ) -> None:
        self.interface = interface
        self.client = client
        self.renderer = renderer
        self.memory = memory
        self.system_message_provider = system_message_provider
        self.locks = ConversationLocks()

    # -- request assembly ----------------------------------------------------------------------

    def prepare(
        self, plan: MethodPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[ChatClientRequestSpec, str | None]:
        """Bind the arguments and fill a request spec; returns it with the conversation id (or ``None``)."""
        values = plan.bind(args, kwargs)
        conversation: str | None = None
        if self.memory is not None:
            raw = values[plan.memory_index] if plan.memory_index is not None else DEFAULT_CONVERSATION_ID
            conversation = _conversation_id(raw, plan)
        variables = {var: values[i] for var, i in plan.variables}
        if plan.builtins:
            variables.update(_now_variables(plan.builtins))
        render = self.renderer.render
        spec = self.client.prompt()
        system_text = None
        if plan.system_template is not None:
            system_text = render(plan.system_template, variables)
        elif self.system_message_provider is not None:
            provided = self.system_message_provider(conversation or DEFAULT_CONVERSATION_ID)
            system_text = render(provided, variables) if provided else None
        if system_text and system_text.strip():  # a template may render to nothing: then no system message
            spec.system(system_text)
        media = _media(plan, values) if plan.media else None
        if plan.user_template is not None:
            user_text = render(plan.user_template, variables)
            if user_text.strip():
                spec.user(user_text, media=media)
            elif media:
                spec.user(media=media)
            else:
                raise ValueError(f"{plan.qualname}(): the user template rendered to empty text for these arguments")
        elif plan.user_param is not None:
            text = values[plan.user_param]
            if not isinstance(text, str) or not text.strip():
                name = plan.names[plan.user_param]
                got = "an empty string" if isinstance(text, str) else f"a {type(text).__name__}"
                raise (ValueError if isinstance(text, str) else TypeError)(
                    f"{plan.qualname}(): argument {name!r} is the user message and must be non-empty text, got {got}"
                )
            spec.user(text, media=media)  # no params: the argument is sent verbatim, never rendered
        else:
            if not media:
                raise ValueError(f"{plan.qualname}(): no media given and no text, so there is no user message")
            spec.user(media=media)
        if plan.tool_args:
            context = _tool_context(plan, values)
            if context:
                spec.tool_context(context)
        if conversation is not None:
            spec.advisors(params={ContextKeys.CONVERSATION_ID: conversation})
        return spec, conversation

    # -- the four ways a method runs -----------------------------------------------------------

    def invoke(self, plan: MethodPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        spec, conversation = self.prepare(plan, args, kwargs)
        if conversation is None:
            return _call(plan, spec)
        with self.locks.hold(conversation):
            return _call(plan, spec)

    async def ainvoke(self, plan: MethodPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        spec, conversation = self.prepare(plan, args, kwargs)
        if conversation is None:
            return await _acall(plan, spec)
        async with self.locks.ahold(conversation):
            return await _acall(plan, spec)

    def stream(self, plan: MethodPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Iterator[Any]:
        # Arguments are checked now; the model runs when the caller starts iterating.
        spec, conversation = self.prepare(plan, args, kwargs)
        return self._stream(plan, spec, conversation)

    def _stream(self, plan: MethodPlan, spec: ChatClientRequestSpec, conversation: str | None) -> Iterator[Any]:
        hold = self.locks.hold(conversation) if conversation is not None else contextlib.nullcontext()
        with hold:  # held until the stream ends or is closed
            s = spec.stream()
            yield from (s.content() if plan.returns.kind == STREAM_TEXT else s.entity(plan.returns.converter))

    def astream(self, plan: MethodPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> AsyncIterator[Any]:
        spec, conversation = self.prepare(plan, args, kwargs)
        return self._astream(plan, spec, conversation)

    async def _astream(
        self, plan: MethodPlan, spec: ChatClientRequestSpec, conversation: str | None
    ) -> AsyncIterator[Any]:
        hold = self.locks.ahold(conversation) if conversation is not None else contextlib.nullcontext()
        async with hold:
            s = spec.astream()
            items = s.content() if plan.returns.kind == STREAM_TEXT else s.entity(plan.returns.converter)
            async for item in items:
                yield item


def _conversation_id(raw: Any, plan: MethodPlan) -> str:
    if raw is None or isinstance(raw, bool) or not isinstance(raw, (str, int, uuid.UUID)):
        param = plan.names[plan.memory_index] if plan.memory_index is not None else "memory id"
        raise TypeError(
            f"{plan.qualname}(): {param!r} must be a str, int or UUID conversation id, got {type(raw).__name__}"
        )
    text = str(raw)
    if not text.strip():
        raise ValueError(f"{plan.qualname}(): the conversation id cannot be empty")
    return text


def _tool_context(plan: MethodPlan, values: Sequence[Any]) -> dict[str, Any]:
    context: dict[str, Any] = {}
    for key, i in plan.tool_args:
        value = values[i]
        if value is None:
            continue  # an omitted optional value: the tool sees no key rather than None
        if key is not None:
            context[key] = value
        elif isinstance(value, Mapping):
            context.update((k, v) for k, v in value.items() if v is not None)
        else:
            raise TypeError(
                f"{plan.qualname}(): {plan.names[i]!r} must be a mapping (ToolContext or dict), got {type(value).__name__}"
            )
    return context


def _now_variables(names: tuple[str, ...]) -> dict[str, str]:
    now = datetime.datetime.now().astimezone()
    values = {
        "current_date": now.date().isoformat(),
        "current_time": now.time().isoformat(timespec="seconds"),
        "current_date_time": now.isoformat(timespec="seconds"),
    }
    return {n: values[n] for n in names}


def _media(plan: MethodPlan, values: Sequence[Any]) -> list[Any]:
    from chatclient.messages import Media

    out: list[Any] = []
    for i in plan.media:
        value = values[i]
        items = () if value is None else (value,) if isinstance(value, Media) else tuple(value)
        for item in items:
            if not isinstance(item, Media):
                raise TypeError(
                    f"{plan.qualname}(): {plan.names[i]!r} must hold Media objects, got {type(item).__name__}"
                )
            out.append(item)
    return out


def _call(plan: MethodPlan, spec: ChatClientRequestSpec) -> Any:
    kind = plan.returns.kind
    response = spec.call()
    if kind == TEXT:
        return response.content() or ""
    if kind == ENTITY:
        return response.entity(plan.returns.converter)
    if kind == CHAT_RESPONSE:
        return response.chat_response()
    if kind == CLIENT_RESPONSE:
        return response.chat_client_response()
    if kind == RESULT_TEXT:
        whole = response.chat_client_response()
        return result_of(response.content() or "", whole)
    if kind == RESULT_ENTITY:
        entity = response.response_entity(plan.returns.converter).entity
        return result_of(entity, response.chat_client_response())
    raise AssertionError(kind)  # pragma: no cover - return_plan only makes the kinds above


async def _acall(plan: MethodPlan, spec: ChatClientRequestSpec) -> Any:
    kind = plan.returns.kind
    response = spec.acall()
    if kind == TEXT:
        return (await response.content()) or ""
    if kind == ENTITY:
        return await response.entity(plan.returns.converter)
    if kind == CHAT_RESPONSE:
        return await response.chat_response()
    if kind == CLIENT_RESPONSE:
        return await response.chat_client_response()
    if kind == RESULT_TEXT:
        whole = await response.chat_client_response()
        return result_of((await response.content()) or "", whole)
    if kind == RESULT_ENTITY:
        entity = (await response.response_entity(plan.returns.converter)).entity
        return result_of(entity, await response.chat_client_response())
    raise AssertionError(kind)  # pragma: no cover


# -- building the service -------------------------------------------------------------------------


_STUB_OPS = frozenset({"RESUME", "NOP", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST", "RETURN_GENERATOR", "POP_TOP"})


def _is_stub(fn: Callable[..., Any]) -> bool:
    """True when the body is only a docstring, ``...`` or ``pass`` (a declaration to implement)."""
    import dis

    for ins in dis.get_instructions(fn):
        if ins.opname not in _STUB_OPS:
            return False
        if ins.opname in ("LOAD_CONST", "RETURN_CONST") and ins.argval is not None:
            return False
    return True


def _declared_methods(interface: type) -> dict[str, Callable[..., Any]]:
    """The methods a service implements: abstract ones of an ABC, body-less public ones of a Protocol."""
    abstract = set(getattr(interface, "__abstractmethods__", ()))
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(interface.__mro__):
        if klass in (object,) or klass.__module__ == "typing" or klass is abc.ABC:
            continue
        # a body-less method declares a service method only where it is written in a Protocol
        is_protocol = bool(klass.__dict__.get("_is_protocol", False))
        for name, value in vars(klass).items():
            if not inspect.isfunction(value):
                found.pop(name, None)
                continue
            if name.startswith("_"):
                continue
            if name in abstract or (is_protocol and _is_stub(value)):
                found[name] = value
            else:
                found.pop(name, None)  # a concrete method (or an override): kept as written
    return found


def _check_interface(interface: Any) -> None:
    if not isinstance(interface, type):
        raise TypeError(
            f"ai_service needs an interface class (a typing.Protocol or an ABC), got {type(interface).__name__}"
        )
    if not getattr(interface, "_is_protocol", False) and not isinstance(interface, abc.ABCMeta):
        raise AiServiceDefinitionError(
            f"{interface.__name__} is neither a typing.Protocol nor an abstract class; declare it as "
            f"`class {interface.__name__}(Protocol)` or `class {interface.__name__}(ABC)` with abstract methods"
        )


def _service_advisors(
    interface: type,
    memory: ChatMemory | None,
    retriever: Any,
    input_guardrails: Sequence[Any],
    output_guardrails: Sequence[Any],
    output_guardrail_retries: int,
) -> list[Advisor]:
    # advisors -> chatclient is the dependency rule. A service is an assembly, like a user's script,
    # so it may use the built-in advisors; they are imported here, when a service is built, and never
    # when chatclient.services is imported.
    advisors: list[Advisor] = []
    if memory is not None:
        from advisors.memory import MessageChatMemoryAdvisor

        advisors.append(MessageChatMemoryAdvisor(chat_memory=memory))
    if retriever is not None:
        if callable(getattr(retriever, "retrieve", None)):
            from advisors.rag import RetrievalAugmentationAdvisor

            advisors.append(RetrievalAugmentationAdvisor(document_retriever=retriever))
        elif callable(getattr(retriever, "similarity_search", None)):
            from advisors.qa import QuestionAnswerAdvisor

            advisors.append(QuestionAnswerAdvisor(vector_store=retriever))
        else:
            raise TypeError(
                f"retriever must be a DocumentRetriever (with retrieve(query)) or a VectorStore, got "
                f"{type(retriever).__name__}"
            )
    if input_guardrails:
        from advisors.guardrails import InputGuardrailAdvisor

        advisors.append(InputGuardrailAdvisor(list(input_guardrails)))
    if output_guardrails:
        from advisors.guardrails import OutputGuardrailAdvisor

        advisors.append(OutputGuardrailAdvisor(list(output_guardrails), max_retries=output_guardrail_retries))
    return advisors


def _make_method(plan: MethodPlan, runtime: ServiceRuntime, original: Callable[..., Any]) -> Callable[..., Any]:
    method: Callable[..., Any]
    if plan.returns.streams:
        if plan.returns.async_stream:

            def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                return runtime.astream(plan, args, kwargs)
        else:

            def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                return runtime.stream(plan, args, kwargs)
    elif plan.is_async:

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await runtime.ainvoke(plan, args, kwargs)
    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return runtime.invoke(plan, args, kwargs)

    method.__name__ = original.__name__
    method.__qualname__ = original.__qualname__
    method.__doc__ = original.__doc__
    method.__module__ = original.__module__
    setattr(method, "__signature__", plan.signature)  # noqa: B010 - help() shows the declared signature
    setattr(method, PLAN_ATTR, plan)
    return method


def ai_service(
    interface: type[T],
    *,
    client: ChatClient,
    tools: Sequence[Any] = (),
    memory: ChatMemory | None = None,
    memory_provider: Callable[[Any], ChatMemory] | None = None,
    advisors: Sequence[Advisor] = (),
    input_guardrails: Sequence[Any] = (),
    output_guardrails: Sequence[Any] = (),
    retriever: Any = None,
    system_message_provider: Callable[[Any], str | None] | None = None,
    output_guardrail_retries: int = 2,
) -> T:
    """Implement ``interface`` (a ``typing.Protocol`` or an abstract class) with calls to ``client``'s model.

    Every body-less method of a Protocol (every abstract method of an ABC) is analysed now, and a
    bad declaration raises ``AiServiceDefinitionError`` naming the method and the parameter. At
    call time a method fills one request spec and runs it:

    * prompt: ``@system`` / ``@user`` templates (jinja2 over the parameters; ``V`` renames one), the
      docstring as the user template when there is no ``@user``, else the one ``str`` parameter the
      system template does not use, sent verbatim; ``Media`` parameters are attached to the user
      message; ``ToolArg`` parameters go to the tools' ``ToolContext``;
    * return type: ``str``, ``ChatResponse``, ``Result[T]``, any type ``entity()`` accepts (same
      structured-output path), ``Iterator[str]`` / ``AsyncIterator[str]`` (stream), ``Iterator[Partial[T]]``;
      ``async def`` methods use ``acall``;
    * ``memory`` (one ``ChatMemory`` keyed by conversation id) or ``memory_provider(id)`` (one memory
      per id) adds a ``MessageChatMemoryAdvisor``; the ``MemoryId`` parameter picks the conversation,
      ``"default"`` without one; calls on one conversation are serialised;
    * ``retriever`` (a ``DocumentRetriever`` or a ``VectorStore``) adds retrieval augmentation; the
      documents appear in ``Result.sources``;
    * ``input_guardrails`` / ``output_guardrails`` add ``InputGuardrailAdvisor`` /
      ``OutputGuardrailAdvisor(max_retries=output_guardrail_retries)``;
    * ``tools`` are offered on every call (a method of another service is turned into a tool with
      ``service_tool``); ``advisors`` are added to every call.

    >>> from typing import Protocol
    >>> from chatclient.testing import ScriptedChatModel
    >>> class Greeter(Protocol):
    ...     def greet(self, name: str) -> str:
    ...         '''Say hello to {{ name }}.'''
    >>> greeter = ai_service(Greeter, client=ChatClient.create(ScriptedChatModel(["Hello, Ada!"])))
    >>> greeter.greet("Ada")
    'Hello, Ada!'
    """
    _check_interface(interface)
    if not isinstance(client, ChatClient):
        hint = (
            f"; wrap the model: client=ChatClient.create({type(client).__name__}(...))"
            if callable(getattr(client, "call", None))
            else ""
        )
        raise TypeError(f"ai_service needs client=ChatClient, got {type(client).__name__}{hint}")
    if memory is not None and memory_provider is not None:
        raise ValueError("give memory= (one memory keyed by conversation id) or memory_provider=, not both")
    if memory_provider is not None and not callable(memory_provider):
        raise TypeError("memory_provider must be a callable taking a conversation id and returning a ChatMemory")
    if memory is not None and not callable(getattr(memory, "get", None)):
        raise TypeError(f"memory must be a ChatMemory, got {type(memory).__name__}")
    if system_message_provider is not None and not callable(system_message_provider):
        raise TypeError("system_message_provider must be a callable taking a conversation id")
    if isinstance(tools, (str, bytes)) or isinstance(advisors, (str, bytes)):
        raise TypeError("tools and advisors take sequences")

    renderer = getattr(getattr(client, "_defaults", None), "renderer", None) or default_renderer()
    declared = _declared_methods(interface)
    if not declared:
        raise AiServiceDefinitionError(
            f"{interface.__name__} declares no methods to implement (public methods whose body is only a "
            "docstring or `...`, or abstract methods)"
        )
    plans = {
        name: method_plan(interface, fn, renderer=renderer, has_system_provider=system_message_provider is not None)
        for name, fn in declared.items()
    }
    effective_memory: Any = (
        memory if memory is not None else (_ProviderMemory(memory_provider) if memory_provider is not None else None)
    )
    if effective_memory is None:
        for plan in plans.values():
            if plan.memory_index is not None:
                param = plan.names[plan.memory_index]
                raise AiServiceDefinitionError(
                    f"{plan.qualname}: parameter {param!r} is a MemoryId but the service has no memory; pass "
                    "memory=MessageWindowChatMemory() or memory_provider=lambda id: ...",
                    method=plan.name,
                    parameter=param,
                )

    extra = _service_advisors(
        interface, effective_memory, retriever, input_guardrails, output_guardrails, output_guardrail_retries
    )
    extra.extend(advisors)
    offered = [service_tool(t) if _is_service_method(t) else t for t in tools]
    if extra or offered:
        builder = client.mutate()
        if extra:
            builder.default_advisors(*extra)
        if offered:
            builder.default_tools(*offered)
        client = builder.build()

    runtime = ServiceRuntime(interface, client, renderer, effective_memory, system_message_provider)
    namespace: dict[str, Any] = {name: _make_method(plan, runtime, declared[name]) for name, plan in plans.items()}
    namespace[SERVICE_ATTR] = runtime
    namespace["__init__"] = lambda self: None
    namespace["__repr__"] = lambda self: f"<ai_service {interface.__qualname__}>"
    namespace["__module__"] = interface.__module__
    cls = type(f"{interface.__name__}Service", (interface,), namespace)
    try:
        instance = cls()
    except TypeError as exc:  # e.g. an abstract property nobody can implement
        raise AiServiceDefinitionError(f"{interface.__name__} cannot be implemented: {exc}") from None
    return instance  # type: ignore[no-any-return]


def evict_memory(service: Any, conversation_id: str) -> None:
    """Forget a conversation of ``service``: clear its history (and drop the provider's memory for it)."""
    runtime = getattr(type(service), SERVICE_ATTR, None)
    if not isinstance(runtime, ServiceRuntime):
        raise TypeError(f"evict_memory needs a service made by ai_service, got {type(service).__name__}")
    if runtime.memory is None:
        raise ValueError("this service has no memory")
    key = str(conversation_id)
    with runtime.locks.hold(key):
        if isinstance(runtime.memory, _ProviderMemory):
            runtime.memory.evict(key)
        else:
            runtime.memory.clear(key)


# -- a service method as a tool -------------------------------------------------------------------


def _is_service_method(obj: Any) -> bool:
    return inspect.ismethod(obj) and hasattr(obj.__func__, PLAN_ATTR)


_CONTEXT_PARAM = "service_tool_context_"


def service_tool(
    method: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
) -> Any:
    """A ``ToolCallback`` that calls a service method, so one service can delegate to another.

    The tool is named after the method; its description is ``description`` or the method's
    docstring; its input schema holds the method's parameters except the ``MemoryId``, ``ToolArg``
    and ``Media`` ones. ``ToolArg`` parameters are filled from the calling request's tool context
    (same key); the memory id keeps its default (``"default"``). Streaming methods cannot be tools.

    >>> from typing import Protocol
    >>> from chatclient.testing import ScriptedChatModel
    >>> class Expert(Protocol):
    ...     def answer(self, question: str) -> str:
    ...         '''Answer this question: {{ question }}'''
    >>> expert = ai_service(Expert, client=ChatClient.create(ScriptedChatModel(["42"])))
    >>> service_tool(expert.answer).definition.name
    'answer'
    """
    from chatclient.tools import FunctionToolCallback, ToolContext

    if not _is_service_method(method):
        raise TypeError(
            "service_tool takes a method of a service built by ai_service, e.g. service_tool(expert.answer)"
        )
    plan: MethodPlan = getattr(method.__func__, PLAN_ATTR)  # type: ignore[attr-defined]
    if plan.returns.streams:
        raise TypeError(f"{plan.qualname} streams its answer; only methods returning a value can be tools")
    hidden = {plan.memory_index, *plan.media, *(i for _, i in plan.tool_args)}
    parameters: list[inspect.Parameter] = []
    for i, p in enumerate(list(plan.signature.parameters.values())[1:]):
        if i in hidden:
            if p.default is p.empty and i in plan.media:  # memory ids and tool context values are filled in
                raise TypeError(f"{plan.qualname}: parameter {p.name!r} has no default and a model cannot give it")
            continue
        annotation = p.annotation
        base, meta = unwrap_annotation(annotation)
        if meta:
            annotation = base
        parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
    parameters.append(inspect.Parameter(_CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext))
    from_context = [(key, plan.names[i]) for key, i in plan.tool_args]  # key None: the whole context
    memory_param = plan.names[plan.memory_index] if plan.memory_index is not None else None
    needs_default_memory = memory_param is not None and plan.defaults[plan.index[memory_param]] is MISSING

    def arguments(kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        context = kwargs.pop(_CONTEXT_PARAM, None) or {}
        for key, param in from_context:
            if key is None:
                kwargs[param] = context
            elif key in context:
                kwargs[param] = context[key]
        if needs_default_memory:
            kwargs[memory_param] = DEFAULT_CONVERSATION_ID  # type: ignore[index]
        # positional-only parameters cannot be passed by keyword
        args = [kwargs.pop(n, plan.defaults[i]) for i, n in enumerate(plan.names[: plan.positional_only])]
        return args, kwargs

    fn: Callable[..., Any]
    if plan.is_async:

        async def fn(**kwargs: Any) -> Any:
            args, rest = arguments(kwargs)
            return await method(*args, **rest)
    else:

        def fn(**kwargs: Any) -> Any:
            args, rest = arguments(kwargs)
            return method(*args, **rest)

    fn.__name__ = plan.name
    fn.__doc__ = description or plan.description
    setattr(fn, "__signature__", inspect.Signature(parameters))  # noqa: B010 - the tool schema is built from it
    return FunctionToolCallback(fn, name=name or plan.name, description=description, return_direct=return_direct)


__all__ = ["ConversationLocks", "ServiceRuntime", "ai_service", "evict_memory", "service_tool"]

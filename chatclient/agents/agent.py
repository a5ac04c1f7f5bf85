"""Leaf agents: a model behind a ChatClient (``agent``), a plain function (``agent_function``) and a
one-method AI service (``service_agent``).

A model agent's call is an ordinary ``ChatClient`` request: the client's advisors, events, spans,
budgets, guardrails and fallbacks apply. Its ``system`` and ``user`` templates are jinja over the
scope's state; a variable missing from the scope raises ``AgentInputError`` before any model call.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, get_type_hints, overload

from pydantic import ValidationError

from chatclient.agents.base import Agent, RunCancelled, Step, check_key, check_name
from chatclient.agents.scope import AgenticScope, auto_register
from chatclient.errors import AgentInputError
from chatclient.events import Finished, ReasoningDelta, TextDelta, UsageUpdate
from chatclient.models.base import ChatResponse
from chatclient.request import ContextKeys

if TYPE_CHECKING:
    from chatclient.client import ChatClient, ChatClientRequestSpec
    from chatclient.events import StreamEvent

DEFAULT_USER = "{{ request }}"
"""The user template of an agent built without ``user=``: the scope's ``request``."""

# Events of an agent's model call that a workflow stream passes on from agents not in last position.
_TEXT_KINDS = (TextDelta, ReasoningDelta, UsageUpdate, Finished)


def _renderer() -> Any:
    from chatclient.templates import default_renderer

    return default_renderer()


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class _Template:
    """A jinja template; one made only of text and ``{{ name }}`` placeholders is rendered by
    joining strings (what jinja would produce: ``str(value)``), without a jinja call per step."""

    __slots__ = ("parts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts: tuple[tuple[bool, str], ...] | None = None
        pieces: list[tuple[bool, str]] = []
        last = 0
        for match in _PLACEHOLDER.finditer(text):
            pieces.append((False, text[last : match.start()]))
            pieces.append((True, match.group(1)))
            last = match.end()
        pieces.append((False, text[last:]))
        if not any(mark in piece for is_var, piece in pieces if not is_var for mark in ("{{", "{%", "{#", "}}")):
            # jinja writes every line break of the template text as "\n"
            self.parts = tuple(
                (is_var, piece if is_var else piece.replace("\r\n", "\n").replace("\r", "\n"))
                for is_var, piece in pieces
                if is_var or piece
            )

    def render(self, scope: AgenticScope) -> str:
        parts = self.parts
        if parts is None:
            return str(_renderer().render(self.text, dict(scope.state)))
        state = scope._state
        text = ""
        for is_var, piece in parts:  # a loop, not a comprehension: one call less per step
            text += str(state.get(piece)) if is_var else piece
        if len(text) > 1_000_000 and len(text) > (limit := _renderer().max_output_chars):
            from chatclient.errors import TemplateError

            raise TemplateError(f"the rendered template is longer than max_output_chars={limit:,}")
        return text


class LlmAgent(Agent):
    """An agent answered by a model through a ``ChatClient`` (built by ``agent(...)``)."""

    def __init__(
        self,
        client: ChatClient,
        *,
        name: str,
        description: str = "",
        system: str | None = None,
        user: str | None = None,
        output_key: str | None = None,
        output_type: Any = str,
        tools: Sequence[Any] = (),
        advisors: Sequence[Any] = (),
        optional: bool = False,
        max_validation_attempts: int = 3,
        memory_id: str | Callable[[AgenticScope], Any] | None = None,
        compensate: Callable[..., Any] | None = None,
    ) -> None:
        from chatclient.client import ChatClient

        if not isinstance(client, ChatClient):
            hint = "; wrap the model: ChatClient.create(model)" if callable(getattr(client, "call", None)) else ""
            raise TypeError(f"agent() needs a ChatClient, got {type(client).__name__}{hint}")
        self.client = client
        self.name = check_name(name)
        self.description = description or ""
        self.output_key = check_key(output_key)
        self.output_type = output_type if output_type is not None else str
        self.system = system
        self.user = user if user is not None else DEFAULT_USER
        for text, what in ((self.system, "system"), (self.user, "user")):
            if text is not None and (not isinstance(text, str) or not text.strip()):
                raise ValueError(f"agent {name!r}: {what} must be a non-empty template string")
        if isinstance(tools, (str, bytes)) or isinstance(advisors, (str, bytes)):
            raise TypeError("tools and advisors take sequences")
        self.tools = tuple(tools)
        self.advisors = tuple(advisors)
        self.optional = bool(optional)
        self.max_validation_attempts = max_validation_attempts
        if compensate is not None and not callable(compensate):
            raise TypeError(f"agent {name!r}: compensate= must be a callable (the undo function)")
        self.compensate = compensate
        if (
            memory_id is not None
            and not callable(memory_id)
            and (not isinstance(memory_id, str) or not memory_id.strip())
        ):
            raise ValueError(f"agent {name!r}: memory_id must be a non-empty template string or a callable(scope)")
        self.memory_id = memory_id
        self._memory_id = _Template(memory_id) if isinstance(memory_id, str) else None
        renderer = _renderer()
        names: dict[str, None] = {}
        for text in (self.system, self.user, memory_id if isinstance(memory_id, str) else None):
            if text is not None:
                for var in sorted(renderer.variables(text)):  # TemplateError for a malformed template
                    names.setdefault(var, None)
        self._inputs = tuple(names)
        self._reads = self._inputs
        self._n_required = len(self._inputs)  # every template variable is required
        self._system = _Template(self.system) if self.system is not None else None
        self._user = _Template(self.user)
        auto_register(self.output_type)

    def input_names(self) -> tuple[str, ...]:
        return self._inputs

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        """An agent is run, not called: this says how (``writer.run(topic=...)``)."""
        raise TypeError(f"{self.name} is an agent, not a function: run it with its inputs by name: {self.call_hint()}")

    def _missing(self, scope: AgenticScope) -> list[str]:
        state = scope._state
        return [k for k in self._inputs if k not in state]

    def _spec(self, step: Step) -> ChatClientRequestSpec:
        spec = self.client.prompt()
        if step.run.advisor_params:  # the run's request context (a principal), under this agent's own entries
            spec.advisors(params=step.run.advisor_params)
        if self._system is not None:
            spec.system(self._system.render(step.scope))
        spec.user(self._user.render(step.scope))
        if self.memory_id is not None:
            spec.advisors(params={ContextKeys.CONVERSATION_ID: self._conversation_id(step.scope)})
        if self.tools:
            spec.tools(*self.tools)
        if self.output_type is not str:
            from advisors.validation import StructuredOutputValidationAdvisor

            validation = StructuredOutputValidationAdvisor(self.output_type, self.max_validation_attempts)
            spec.advisors(*self.advisors, validation)
        elif self.advisors:
            spec.advisors(*self.advisors)
        run = step.run
        if run.deadline is not None:
            spec.max_duration(max(run.deadline.remaining(), 1e-3))
        if run.emit is not None and not (step.tail and self.output_type is str):
            emit = run.emit

            def forward(event: StreamEvent) -> None:
                if not isinstance(event, _TEXT_KINDS):
                    emit(event)

            spec.on_event(forward)
        return spec

    def _conversation_id(self, scope: AgenticScope) -> str:
        """This invocation's chat-memory conversation id (``memory_id=``)."""
        template, source = self._memory_id, self.memory_id
        value = template.render(scope) if template is not None else source(scope) if callable(source) else None
        text = str(value) if value is not None else ""
        if not text.strip():
            raise ValueError(f"agent {self.name!r}: memory_id gave an empty conversation id")
        return text

    def _usage(self, step: Step, response: Any) -> None:
        try:
            usage = response.metadata.usage
        except AttributeError:  # not a ChatResponse (None, or a test double's answer)
            return
        if usage is not None:
            step.usage = usage

    def _answer(self, step: Step, cr: Any) -> Any:
        """The answer's text, with its usage recorded on the step."""
        if type(cr) is ChatResponse:  # the usual answer: read directly (this runs once per step)
            if cr.metadata.usage is not None:
                step.usage = cr.metadata.usage
            return cr.generations[0].output.text if cr.generations else None
        self._usage(step, cr)
        return _text(cr)

    def _invoke(self, step: Step) -> Any:
        spec = self._spec(step)
        if self.output_type is not str:
            answer = spec.call().response_entity(self.output_type)
            self._usage(step, answer.response)
            return answer.entity
        if step.run.emit is not None and step.tail:
            return self._stream(step, spec)
        return self._answer(step, spec.call().chat_response())

    def _stream(self, step: Step, spec: ChatClientRequestSpec) -> Any:
        emit = step.run.emit
        assert emit is not None
        events = spec.stream().events()
        try:
            for event in events:
                if step.run.cancelled:
                    raise RunCancelled()
                if isinstance(event, Finished):
                    self._usage(step, event.response)
                    return _text(event.response)
                emit(event)
        finally:
            events.close()  # type: ignore[attr-defined]
        return None

    async def _ainvoke(self, step: Step) -> Any:
        spec = self._spec(step)
        if self.output_type is not str:
            answer = await spec.acall().response_entity(self.output_type)
            self._usage(step, answer.response)
            return answer.entity
        if step.run.emit is not None and step.tail:
            emit = step.run.emit
            events = spec.astream().events()
            try:
                async for event in events:
                    if isinstance(event, Finished):
                        self._usage(step, event.response)
                        return _text(event.response)
                    emit(event)
            finally:
                await events.aclose()  # type: ignore[attr-defined]
            return None
        return self._answer(step, await spec.acall().chat_response())


def _text(response: Any) -> str | None:
    result = getattr(response, "result", None)
    return None if result is None else result.output.text


def agent(
    client: ChatClient,
    *,
    name: str,
    description: str = "",
    system: str | None = None,
    user: str | None = None,
    output_key: str | None = None,
    output_type: Any = str,
    tools: Sequence[Any] = (),
    advisors: Sequence[Any] = (),
    optional: bool = False,
    max_validation_attempts: int = 3,
    memory_id: str | Callable[[AgenticScope], Any] | None = None,
    compensate: Callable[..., Any] | None = None,
) -> LlmAgent:
    """An agent answered by ``client``'s model (LangChain4j: ``AgenticServices.agentBuilder``).

    ``system`` / ``user`` are jinja templates over the scope's state (without ``user``, the scope's
    ``request`` is the user message); their variables are the agent's inputs, and a missing one
    raises ``AgentInputError`` before any model call (``optional=True`` skips the agent instead).
    ``output_type`` other than ``str`` goes through ``entity()`` with a
    ``StructuredOutputValidationAdvisor`` (``max_validation_attempts`` re-asks). The answer is written
    to ``scope[output_key]``. ``tools`` and ``advisors`` are added to this agent's requests only.
    ``memory_id`` gives each invocation its own chat-memory conversation (LangChain4j ``@MemoryId``):
    a template over the scope (``"{{ user }}/writer"``) or ``callable(scope)``, sent as the request's
    ``ContextKeys.CONVERSATION_ID`` to the client's memory advisor. ``compensate`` is the undo
    function ``compensating(...)`` runs when a later agent fails.

    >>> from chatclient import ChatClient
    >>> from chatclient.testing import ScriptedChatModel
    >>> writer = agent(ChatClient.create(ScriptedChatModel(["A story about otters."])), name="writer",
    ...                user="Write a story about {{ topic }}.", output_key="story")
    >>> writer.run(topic="otters").scope.read("story")
    'A story about otters.'
    """
    return LlmAgent(
        client,
        name=name,
        description=description,
        system=system,
        user=user,
        output_key=output_key,
        output_type=output_type,
        tools=tools,
        advisors=advisors,
        optional=optional,
        max_validation_attempts=max_validation_attempts,
        memory_id=memory_id,
        compensate=compensate,
    )


# -- function agents --------------------------------------------------------------------------


def _load(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class FunctionAgent(Agent):
    """A plain (non-AI) function as an agent (built by ``@agent_function``).

    Its parameters are read from the scope by name and converted to their annotated types (pydantic
    validation); a parameter annotated ``AgenticScope`` receives the scope itself. Parameters with
    defaults are optional inputs. ``async def`` functions are awaited in async runs; sync functions
    run inline (keep them quick or make them ``async``).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        output_key: str | None = None,
        optional: bool = False,
        compensate: Callable[..., Any] | None = None,
    ) -> None:
        if not callable(fn) or isinstance(fn, Agent):
            raise TypeError(f"agent_function takes a function, got {type(fn).__name__}")
        if compensate is not None and not callable(compensate):
            raise TypeError("agent_function: compensate= must be a callable (the undo function)")
        self.compensate = compensate
        self.fn = fn
        self.name = check_name(name or getattr(fn, "__name__", None))
        self.description = description if description is not None else inspect.getdoc(fn) or ""
        self.output_key = check_key(output_key)
        self.optional = bool(optional)
        self.is_async = inspect.iscoroutinefunction(fn)
        self._module = getattr(fn, "__module__", None)
        self._qualname = getattr(fn, "__qualname__", None)
        self._plan()
        functools.update_wrapper(self, fn, assigned=("__module__", "__qualname__", "__doc__"), updated=())

    def _plan(self) -> None:
        from pydantic import TypeAdapter

        signature = inspect.signature(self.fn)
        try:
            hints = get_type_hints(self.fn)
        except Exception:  # unresolvable forward references: no conversion for them
            hints = {}
        self._params: list[tuple[str, bool, Any, Any]] = []  # name, required, adapter, default
        self._scope_params: list[str] = []
        self._exact: dict[str, type] = {}
        for p in signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"agent_function {self.name!r}: *args/**kwargs cannot be read from the scope")
            if p.kind is p.POSITIONAL_ONLY:
                raise TypeError(f"agent_function {self.name!r}: positional-only parameter {p.name!r}")
            hint = hints.get(p.name, Any)
            if hint is AgenticScope:
                self._scope_params.append(p.name)
                continue
            auto_register(hint)
            adapter = TypeAdapter(hint) if hint is not Any else None
            self._params.append((p.name, p.default is p.empty, adapter, p.default))
            if isinstance(hint, type):
                self._exact[p.name] = hint  # a value of exactly this class needs no validation
        self._hints = hints
        self._names = tuple(p[0] for p in self._params)
        # All parameters required: a step that read every one of them has none missing.
        self._reads = self._names
        self._n_required = len(self._names) if all(p[1] for p in self._params) else -1

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_params", None)
        state.pop("_scope_params", None)
        state.pop("_hints", None)
        state.pop("_names", None)
        state.pop("_exact", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plan()

    def __reduce__(self) -> Any:
        # A decorated module-level function is replaced by this agent in its module: pickle by name.
        if self._module and self._qualname and "<" not in self._qualname:
            try:
                if _load(self._module, self._qualname) is self:
                    return (_load, (self._module, self._qualname))
            except (ImportError, AttributeError):
                pass
        return super().__reduce__()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself (the decorator keeps it callable)."""
        return self.fn(*args, **kwargs)

    def input_names(self) -> tuple[str, ...]:
        return self._names

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        return {name: (self._hints.get(name), required) for name, required, _, _ in self._params}

    def _missing(self, scope: AgenticScope) -> list[str]:
        return [name for name, required, _, _ in self._params if required and not scope.has(name)]

    def _arguments(self, scope: AgenticScope) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        exact = self._exact
        for name, _required, adapter, default in self._params:
            if not scope.has(name):
                kwargs[name] = default
                continue
            value = scope.read(name)
            if adapter is not None and type(value) is not exact.get(name):
                try:
                    value = adapter.validate_python(value)
                except ValidationError as exc:
                    errors = exc.errors()
                    reason = errors[0]["msg"] if errors else str(exc)
                    raise AgentInputError(
                        self.name,
                        (name,),
                        f"agent {self.name!r}: the scope value {name!r} does not fit the parameter's type "
                        f"{getattr(self._hints.get(name), '__name__', self._hints.get(name))}: "
                        f"{reason}",
                    ) from None
            kwargs[name] = value
        for name in self._scope_params:
            kwargs[name] = scope
        return kwargs

    def _invoke(self, step: Step) -> Any:
        kwargs = self._arguments(step.scope)
        if self.is_async:
            from chatclient.models.base import run_sync

            return run_sync(self.fn(**kwargs))
        return self.fn(**kwargs)

    async def _ainvoke(self, step: Step) -> Any:
        kwargs = self._arguments(step.scope)
        if self.is_async:
            return await self.fn(**kwargs)
        return self.fn(**kwargs)


@overload
def agent_function(fn: Callable[..., Any], /) -> FunctionAgent: ...
@overload
def agent_function(
    *,
    output_key: str | None = None,
    name: str | None = None,
    description: str | None = None,
    optional: bool = False,
    compensate: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], FunctionAgent]: ...


def agent_function(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    output_key: str | None = None,
    name: str | None = None,
    description: str | None = None,
    optional: bool = False,
    compensate: Callable[..., Any] | None = None,
) -> Any:
    """Make a plain function an agent (LangChain4j: a non-AI agent, ``@Agent`` on a plain method).

    >>> @agent_function(output_key="total")
    ... def add(a: int, b: int) -> int:
    ...     return a + b
    >>> add.run(a="2", b=3).output
    5
    """

    def wrap(f: Callable[..., Any]) -> FunctionAgent:
        return FunctionAgent(
            f, name=name, description=description, output_key=output_key, optional=optional, compensate=compensate
        )

    return wrap(fn) if fn is not None else wrap


# -- service agents ---------------------------------------------------------------------------


class ServiceAgent(Agent):
    """A one-method ``ai_service`` interface as an agent (built by ``service_agent``); the method's
    parameters are read from the scope by name."""

    def __init__(
        self,
        interface: type,
        *,
        client: ChatClient,
        output_key: str | None,
        name: str | None = None,
        description: str | None = None,
        optional: bool = False,
        **service_options: Any,
    ) -> None:
        self.interface = interface
        self.client = client
        self.service_options = service_options
        self.output_key = check_key(output_key)
        self.optional = bool(optional)
        service = self._service()
        from chatclient.services.service import SERVICE_ATTR

        plans = getattr(type(service), SERVICE_ATTR, None)
        methods = [
            m
            for m in vars(type(service))
            if callable(getattr(type(service), m)) and hasattr(getattr(type(service), m), "__chatclient_service_plan__")
        ]
        if len(methods) != 1 or plans is None:
            raise TypeError(
                f"service_agent needs an interface with exactly one method to implement; {interface.__name__} "
                f"has {len(methods)}"
            )
        self.method = methods[0]
        plan = getattr(type(service), self.method).__chatclient_service_plan__
        self._names = tuple(plan.names)
        self._required = tuple(
            n for i, n in enumerate(plan.names) if plan.defaults[i] is _missing_marker() and i != plan.memory_index
        )
        self.name = check_name(name or self.method)
        self.description = description if description is not None else (plan.description or "")

    def _service(self) -> Any:
        service = self.__dict__.get("_built")
        if service is None:
            from chatclient.services import ai_service

            service = ai_service(self.interface, client=self.client, **self.service_options)
            self.__dict__["_built"] = service
        return service

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_built", None)
        return state

    def input_names(self) -> tuple[str, ...]:
        return self._names

    def _missing(self, scope: AgenticScope) -> list[str]:
        return [n for n in self._required if not scope.has(n)]

    def _kwargs(self, scope: AgenticScope) -> dict[str, Any]:
        return {n: scope.read(n) for n in self._names if scope.has(n)}

    def _invoke(self, step: Step) -> Any:
        method = getattr(self._service(), self.method)
        result = method(**self._kwargs(step.scope))
        if inspect.isawaitable(result):
            from chatclient.models.base import run_sync

            return run_sync(result)
        return result

    async def _ainvoke(self, step: Step) -> Any:
        method = getattr(self._service(), self.method)
        kwargs = self._kwargs(step.scope)
        if inspect.iscoroutinefunction(method):
            return await method(**kwargs)
        return await asyncio.to_thread(functools.partial(method, **kwargs))


def _missing_marker() -> Any:
    from chatclient.services.analysis import MISSING

    return MISSING


def service_agent(
    interface: type,
    *,
    client: ChatClient,
    output_key: str | None,
    name: str | None = None,
    description: str | None = None,
    optional: bool = False,
    **service_options: Any,
) -> ServiceAgent:
    """A one-method ``ai_service`` interface as an agent (LangChain4j: ``agentBuilder(Iface.class)``).

    The service is built with ``ai_service(interface, client=client, **service_options)`` (tools,
    memory, guardrails...); the method's parameters are read from the scope by name, its answer is
    written to ``scope[output_key]``. The agent is named after the method unless ``name`` is given.
    """
    return ServiceAgent(
        interface,
        client=client,
        output_key=output_key,
        name=name,
        description=description,
        optional=optional,
        **service_options,
    )


__all__ = ["FunctionAgent", "LlmAgent", "ServiceAgent", "agent", "agent_function", "service_agent"]

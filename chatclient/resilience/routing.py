"""``RoutingChatModel``: pick a model per prompt, by a rule or by asking a (cheap) classifier model.

    def router(prompt: Prompt) -> ChatModel:
        return big if len(prompt.contents) > 2000 else small

    model = RoutingChatModel(router, models=[small, big])

or, as LangChain4j's decision-model router does, let a ``ChatClient`` choose from descriptions:

    model = RoutingChatModel(ClassifierRouter(judge_client, {
        "code": (coder, "programming, code review, stack traces"),
        "chat": (general, "anything else"),
    }))
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from chatclient.models.base import BaseChatModel, ChatModel, ChatResponse, ModelCapabilities
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.resilience._common import annotate_span, common_capabilities, model_label

if TYPE_CHECKING:
    from chatclient.client import ChatClient

__all__ = ["ClassifierRouter", "ModelRouter", "RoutingChatModel"]


@runtime_checkable
class ModelRouter(Protocol):
    """Picks the model for a prompt; ``aroute`` (optional) is the async variant."""

    def route(self, prompt: Prompt) -> ChatModel: ...


_MAX_CLASSIFIER_QUESTION = 4000


class ClassifierRouter:
    """A router that asks a ``ChatClient`` which of the described routes fits the user's message.

    ``routes`` maps a route key to ``(model, description)``. The classifier is asked for the key
    only (one word); an answer that names no key, or a failing classifier call, picks ``default``
    (a key; the first route when not given) so routing never fails a request by itself.
    """

    def __init__(
        self,
        client: ChatClient,
        routes: Mapping[str, tuple[ChatModel, str]],
        *,
        default: str | None = None,
        instructions: str | None = None,
    ) -> None:
        if not routes:
            raise ValueError("routes cannot be empty: give at least one key -> (model, description)")
        for key, value in routes.items():
            if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", key):
                raise ValueError(f"route keys must be single words (letters, digits, _ . -), got {key!r}")
            if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str)):
                raise TypeError(f"route {key!r} must map to (model, description)")
        if default is not None and default not in routes:
            raise ValueError(f"default {default!r} is not one of the routes ({', '.join(routes)})")
        self.client = client
        self.routes = dict(routes)
        self.default = default if default is not None else next(iter(routes))
        self.instructions = instructions or (
            "You route requests. Answer with exactly one key from the list below and nothing else.\n"
        )
        self.last_key: str | None = None

    @property
    def models(self) -> tuple[ChatModel, ...]:
        return tuple(m for m, _ in self.routes.values())

    def _question(self, prompt: Prompt) -> str:
        options = "\n".join(f"- {key}: {desc}" for key, (_, desc) in self.routes.items())
        text = (prompt.user_message.text or "")[:_MAX_CLASSIFIER_QUESTION]
        return f"{self.instructions}{options}\n\nRequest:\n{text}\n\nKey:"

    def _pick(self, answer: str | None) -> str:
        words: list[str] = re.findall(r"[A-Za-z0-9_.-]+", answer or "")
        for word in words:
            if word in self.routes:
                return word
        lowered = {k.lower(): k for k in self.routes}
        for word in words:
            if word.lower() in lowered:
                return lowered[word.lower()]
        return self.default

    def route(self, prompt: Prompt) -> ChatModel:
        from chatclient.errors import ChatClientError

        try:
            answer = self.client.prompt().user(self._question(prompt)).call().content()
        except ChatClientError:
            answer = None
        self.last_key = self._pick(answer)
        return self.routes[self.last_key][0]

    async def aroute(self, prompt: Prompt) -> ChatModel:
        from chatclient.errors import ChatClientError

        try:
            answer = await self.client.prompt().user(self._question(prompt)).acall().content()
        except ChatClientError:
            answer = None
        self.last_key = self._pick(answer)
        return self.routes[self.last_key][0]


class _FunctionRouter:
    def __init__(self, fn: Callable[[Prompt], Any]) -> None:
        self.fn = fn

    def route(self, prompt: Prompt) -> ChatModel:
        model = self.fn(prompt)
        if inspect.isawaitable(model):
            close = getattr(model, "close", None)
            if close is not None:
                close()  # never awaited: close it so Python does not warn about it
            raise TypeError(
                "an async router function can only be used with acall()/astream(); give a ModelRouter with route()"
            )
        return _check(model)

    async def aroute(self, prompt: Prompt) -> ChatModel:
        model = self.fn(prompt)
        if inspect.isawaitable(model):
            model = await model
        return _check(model)


def _check(model: Any) -> ChatModel:
    if model is None or not callable(getattr(model, "call", None)):
        raise TypeError(f"the router must return a ChatModel, got {type(model).__name__}")
    return model  # type: ignore[no-any-return]


class RoutingChatModel(BaseChatModel):
    """A chat model that hands each prompt to the model its ``router`` picks.

    ``router`` is a function ``fn(prompt) -> ChatModel`` (may be async for the async modes) or a
    ``ModelRouter`` such as ``ClassifierRouter``. ``models`` lists the candidates so the wrapper can
    advertise only the capabilities they all share (a ``ClassifierRouter`` lists its own). The label
    of the chosen model is in the answer's metadata ``extra["routed_model"]`` and on the span
    (``chatclient.routing.model``).
    """

    def __init__(
        self,
        router: ModelRouter | Callable[[Prompt], Any],
        *,
        models: Sequence[ChatModel] | None = None,
        default_options: ChatOptions | None = None,
    ) -> None:
        if router is None:
            raise ValueError("router cannot be None")
        self.router: Any = router if hasattr(router, "route") else _FunctionRouter(router)
        if not hasattr(self.router, "route") or not callable(self.router.route):
            raise TypeError("router must be a function prompt -> ChatModel or an object with route(prompt)")
        candidates = models if models is not None else getattr(router, "models", None)
        self.models: tuple[ChatModel, ...] = tuple(candidates) if candidates else ()
        """The candidate models, when known (a budget prices a call at the dearest of them)."""
        self.capabilities = common_capabilities(candidates) if candidates else ModelCapabilities()
        self.default_options = default_options

    def _pick(self, prompt: Prompt) -> ChatModel:
        return _check(self.router.route(prompt))

    async def _apick(self, prompt: Prompt) -> ChatModel:
        aroute = getattr(self.router, "aroute", None)
        if aroute is not None:
            return _check(await aroute(prompt))
        return _check(self.router.route(prompt))

    @staticmethod
    def _mark(response: ChatResponse, model: ChatModel) -> ChatResponse:
        label = model_label(model)
        annotate_span("chatclient.routing.model", label)
        return response.with_metadata(routed_model=label)

    def call(self, prompt: Prompt) -> ChatResponse:
        model = self._pick(prompt)
        return self._mark(model.call(prompt), model)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        model = await self._apick(prompt)
        return self._mark(await model.acall(prompt), model)

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        model = self._pick(prompt)
        for chunk in model.stream(prompt):
            yield self._mark(chunk, model) if chunk.has_finish_reason() else chunk

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        model = await self._apick(prompt)
        async for chunk in model.astream(prompt):
            yield self._mark(chunk, model) if chunk.has_finish_reason() else chunk

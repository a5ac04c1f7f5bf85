"""Typed request events (chatclient.events) in the four modes, with the scripted model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from advisors import (
    MessageChatMemoryAdvisor,
    QuestionAnswerAdvisor,
    RetrievalAugmentationAdvisor,
    SafeGuardAdvisor,
    StructuredOutputValidationAdvisor,
    VectorStoreChatMemoryAdvisor,
)
from chatclient import BaseAdvisor, ChatClient, ChatClientRequest, ChatClientResponse
from chatclient.advisor import AdvisorChain
from chatclient.events import (
    AdvisorEvent,
    DocumentsRetrieved,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageUpdate,
)
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import AssistantMessage, Reasoning, ToolCall
from chatclient.models.base import (
    BaseChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    Usage,
)
from chatclient.prompt import Prompt
from chatclient.rag import (
    Document,
    HashingEmbeddingModel,
    SearchRequest,
    SimpleVectorStore,
    VectorStoreDocumentRetriever,
)
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool

MODES = ["call", "stream", "acall", "astream"]


def collect(spec: Any, mode: str) -> list[StreamEvent]:
    """Every event of one run. Call modes: the on_event callback's events, checked against response.events."""
    if mode == "stream":
        return list(spec.stream().events())
    if mode == "astream":

        async def go() -> list[StreamEvent]:
            return [e async for e in spec.astream().events()]

        return asyncio.run(go())
    seen: list[StreamEvent] = []
    spec.on_event(seen.append)
    if mode == "call":
        response = spec.call().chat_client_response()
    else:
        response = asyncio.run(spec.acall().chat_client_response())
    assert list(response.events) == seen
    return seen


def kinds(events: list[StreamEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def answer(mode: str, text: str) -> Any:
    return [text[: len(text) // 2], text[len(text) // 2 :]] if "stream" in mode else text


# -- the model's own events ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_plain_answer_ends_with_usage_and_finished(mode: str) -> None:
    events = collect(ChatClient.create(ScriptedChatModel([answer(mode, "Hello there")])).prompt("hi"), mode)
    assert isinstance(events[-1], Finished)
    assert events[-1].response is not None and events[-1].response.text == "Hello there"
    assert isinstance(events[-2], UsageUpdate) and events[-2].usage.completion_tokens == 2
    if "stream" in mode:
        assert kinds(events) == ["TextDelta", "TextDelta", "UsageUpdate", "Finished"]
        assert text_of(events) == "Hello there"
    else:
        assert kinds(events) == ["UsageUpdate", "Finished"]


def test_events_are_immutable() -> None:
    event = TextDelta("x")
    with pytest.raises(AttributeError):
        event.text = "y"  # type: ignore[misc]
    data = {"message": "m"}
    advisor_event = AdvisorEvent("a", data)
    data["message"] = "changed"
    assert advisor_event.message == "m"
    with pytest.raises(TypeError):
        advisor_event.data["x"] = 1  # type: ignore[index]


class ThinkingModel(BaseChatModel):
    """Streams reasoning first, then the answer."""

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        yield ChatResponse((Generation(AssistantMessage(None, reasoning=(Reasoning("Let me think"),))),))
        yield ChatResponse((Generation(AssistantMessage("42"), GenerationMetadata("stop")),), ChatResponseMetadata())

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in self.stream(prompt):
            yield chunk


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_reasoning_deltas_are_kept_apart_from_text(mode: str) -> None:
    events = collect(ChatClient.create(ThinkingModel()).prompt("q"), mode)
    assert events[0] == ReasoningDelta("Let me think")
    assert events[1] == TextDelta("42")
    assert isinstance(events[-1], Finished) and events[-1].response is not None
    assert events[-1].response.result is not None
    assert events[-1].response.result.output.reasoning_text == "Let me think"


def test_content_stream_is_unchanged_by_listeners() -> None:
    seen: list[StreamEvent] = []
    model = ScriptedChatModel([["a", "b"]])
    spec = ChatClient.create(model).prompt("q").advisors(Emitting("early")).on_event(seen.append)
    assert list(spec.stream().content()) == ["a", "b"]
    # advisors' events still reach the callback in a content() stream
    assert [e for e in seen if isinstance(e, AdvisorEvent)] == [
        AdvisorEvent("early", {"n": 1}),
        AdvisorEvent("early", {"n": 2}),
    ]


# -- advisors' events -----------------------------------------------------------------------------


class Emitting(BaseAdvisor):
    """Emits one event before the model is called (request.emit) and one after (chain.emit)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        request.emit(AdvisorEvent(self.name, {"n": 1}))
        return request

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        chain.emit(AdvisorEvent(self.name, {"n": 2}))
        return response


@pytest.mark.parametrize("mode", MODES)
def test_advisor_events_come_in_order_around_the_answer(mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([answer(mode, "Answer")])).prompt("q").advisors(Emitting("probe"))
    events = collect(spec, mode)
    first, *_ = events
    assert first == AdvisorEvent("probe", {"n": 1})
    assert AdvisorEvent("probe", {"n": 2}) in events
    assert isinstance(events[-1], Finished)
    if "stream" in mode:
        # the after-event is emitted on the final chunk, before that chunk's text is handed on
        assert kinds(events) == ["AdvisorEvent", "TextDelta", "AdvisorEvent", "TextDelta", "UsageUpdate", "Finished"]


def test_emit_rejects_what_is_not_an_event() -> None:
    class Bad(BaseAdvisor):
        def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
            request.emit("searching...")  # type: ignore[arg-type]
            return request

    with pytest.raises(TypeError, match="AdvisorEvent"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(Bad()).call().content()


def test_emit_without_listener_changes_nothing_in_a_content_stream() -> None:
    model = ScriptedChatModel([["a", "b"]])
    assert list(ChatClient.create(model).prompt("q").advisors(Emitting("x")).stream().content()) == ["a", "b"]


class GatedModel(BaseChatModel):
    """Its stream blocks until the test saw the pre-inference event (or 5 s pass), then records whether it did."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.saw_event_first: bool | None = None
        self.agate: asyncio.Event | None = None

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        self.saw_event_first = self.gate.wait(5)
        yield ChatResponse((Generation(AssistantMessage("tok"), GenerationMetadata("stop")),))

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        assert self.agate is not None
        try:
            await asyncio.wait_for(self.agate.wait(), 5)
            self.saw_event_first = True
        except TimeoutError:
            self.saw_event_first = False
        yield ChatResponse((Generation(AssistantMessage("tok"), GenerationMetadata("stop")),))


def test_pre_inference_events_reach_a_sync_consumer_before_the_model_answers() -> None:
    model = GatedModel()
    events = ChatClient.create(model).prompt("q").advisors(Emitting("searching")).stream().events()
    first = next(events)
    assert first == AdvisorEvent("searching", {"n": 1})
    assert model.saw_event_first is None  # the model was not even asked yet for its first chunk
    model.gate.set()
    rest = list(events)
    assert model.saw_event_first is True
    assert kinds(rest) == ["AdvisorEvent", "TextDelta", "Finished"]


def test_pre_inference_events_reach_an_async_consumer_before_the_model_answers() -> None:
    async def go() -> None:
        model = GatedModel()
        model.agate = asyncio.Event()
        events = ChatClient.create(model).prompt("q").advisors(Emitting("searching")).astream().events()
        first = await anext(events)
        assert first == AdvisorEvent("searching", {"n": 1})
        model.agate.set()
        rest = [e async for e in events]
        assert model.saw_event_first is True
        assert kinds(rest) == ["AdvisorEvent", "TextDelta", "Finished"]

    asyncio.run(go())


class SlowFirstToken(BaseChatModel):
    def __init__(self, delay: float) -> None:
        self.delay = delay

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        time.sleep(self.delay)
        yield ChatResponse((Generation(AssistantMessage("late"), GenerationMetadata("stop")),))


def test_slow_model_event_timing() -> None:
    stamps: list[tuple[str, float]] = []
    start = time.monotonic()
    for e in ChatClient.create(SlowFirstToken(0.3)).prompt("q").advisors(Emitting("s")).stream().events():
        stamps.append((type(e).__name__, time.monotonic() - start))
    assert stamps[0][0] == "AdvisorEvent" and stamps[0][1] < 0.2
    token = next(t for k, t in stamps if k == "TextDelta")
    assert token >= 0.3


# -- built-in advisors ----------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def broken(x: int) -> int:
    """Always fails."""
    raise RuntimeError("no luck")


@pytest.mark.parametrize("mode", MODES)
def test_tool_loop_emits_started_and_finished(mode: str) -> None:
    calls = AssistantMessage(None, (ToolCall("c1", "add", '{"a": 2, "b": 3}'), ToolCall("c2", "broken", '{"x": 1}')))
    model = ScriptedChatModel([calls, answer(mode, "It is 5.")])
    events = collect(ChatClient.create(model).prompt("2+3?").tools(add, broken), mode)
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert started == [ToolCallStarted("c1", "add", '{"a": 2, "b": 3}'), ToolCallStarted("c2", "broken", '{"x": 1}')]
    first = finished[0]
    assert (first.id, first.name, first.result, first.is_error) == ("c1", "add", "5", False)
    assert finished[1].is_error and "no luck" in finished[1].result
    assert all(f.duration >= 0 for f in finished)
    order = kinds(events)
    assert order.index("ToolCallStarted") < order.index("ToolCallFinished")
    if "stream" in mode:
        assert order.index("ToolCallFinished") < order.index("TextDelta")
        assert text_of(events) == "It is 5."
    assert isinstance(events[-1], Finished) and events[-1].response is not None
    assert events[-1].response.text == "It is 5."


@pytest.fixture
def store() -> SimpleVectorStore:
    s = SimpleVectorStore(HashingEmbeddingModel(dimensions=256, char_ngrams=True))
    s.add([Document("Hamlet was written by Shakespeare.", id="d1"), Document("Paris is in France.", id="d2")])
    return s


@pytest.mark.parametrize("mode", MODES)
def test_question_answer_advisor_reports_documents_before_the_answer(store: SimpleVectorStore, mode: str) -> None:
    qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=1))
    spec = ChatClient.create(ScriptedChatModel([answer(mode, "Shakespeare.")])).prompt("Who wrote Hamlet?")
    events = collect(spec.advisors(qa), mode)
    assert isinstance(events[0], DocumentsRetrieved)
    assert [d.id for d in events[0].documents] == ["d1"] and events[0].source == "QuestionAnswerAdvisor"


@pytest.mark.parametrize("mode", MODES)
def test_rag_advisor_reports_documents(store: SimpleVectorStore, mode: str) -> None:
    rag = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store, top_k=1))
    spec = ChatClient.create(ScriptedChatModel([answer(mode, "France.")])).prompt("Where is Paris?")
    events = collect(spec.advisors(rag), mode)
    docs = [e for e in events if isinstance(e, DocumentsRetrieved)]
    assert len(docs) == 1 and [d.id for d in docs[0].documents] == ["d2"]
    assert kinds(events).index("DocumentsRetrieved") == 0


@pytest.mark.parametrize("mode", MODES)
def test_vector_memory_reports_recalled_documents(mode: str) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=128))
    memory = VectorStoreChatMemoryAdvisor(store)
    client = ChatClient.builder(ScriptedChatModel(["first", answer(mode, "second")])).default_advisors(memory).build()
    client.prompt("I like tea").call().content()
    events = collect(client.prompt("What do I like?"), mode)
    recalled = [e for e in events if isinstance(e, DocumentsRetrieved)]
    assert recalled and recalled[0].source == "VectorStoreChatMemoryAdvisor"
    assert any("tea" in (d.text or "") for d in recalled[0].documents)


class Actor(BaseModel):
    name: str
    age: int


@pytest.mark.parametrize("mode", MODES)
def test_validation_retry_is_announced(mode: str) -> None:
    model = ScriptedChatModel(['{"name": "Ada"}', answer(mode, '{"name": "Ada", "age": 36}')])
    spec = ChatClient.create(model).prompt("Who is Ada?").advisors(StructuredOutputValidationAdvisor(Actor))
    events = collect(spec, mode)
    retries = [e for e in events if isinstance(e, AdvisorEvent) and e.name == "validation.retry"]
    assert len(retries) == 1
    assert retries[0].data["attempt"] == 2 and retries[0].data["of"] == 4
    assert retries[0].message.startswith("attempt 2 of 4: ") and "age" in retries[0].message
    assert isinstance(events[-1], Finished) and events[-1].response is not None
    assert events[-1].response.text == '{"name": "Ada", "age": 36}'


@pytest.mark.parametrize("mode", MODES)
def test_safeguard_refusal_is_announced(mode: str) -> None:
    model = ScriptedChatModel([])
    spec = ChatClient.create(model).prompt("my password is x").advisors(SafeGuardAdvisor(["password"]))
    events = collect(spec, mode)
    assert events[0] == AdvisorEvent(
        "safeguard.refused", {"advisor": "SafeGuardAdvisor", "message": "the request was refused"}
    )
    assert isinstance(events[-1], Finished) and model.prompts == []


@pytest.mark.parametrize("mode", MODES)
def test_memory_load_is_announced(mode: str) -> None:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    advisor = MessageChatMemoryAdvisor(memory, conversation_id="c1")
    client = ChatClient.builder(ScriptedChatModel(["one", answer(mode, "two")])).default_advisors(advisor).build()
    client.prompt("hello").call().content()
    events = collect(client.prompt("again"), mode)
    loaded = events[0]
    assert isinstance(loaded, AdvisorEvent) and loaded.name == "memory.loaded"
    assert loaded.data["messages"] == 2 and loaded.data["conversation_id"] == "c1"


# -- callbacks ------------------------------------------------------------------------------------


def test_async_callbacks_are_awaited_before_acall_returns() -> None:
    seen: list[str] = []

    async def slow(event: StreamEvent) -> None:
        await asyncio.sleep(0.01)
        seen.append(type(event).__name__)

    async def go() -> None:
        spec = ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(Emitting("e")).on_event(slow)
        await spec.acall().content()

    asyncio.run(go())
    assert seen == ["AdvisorEvent", "AdvisorEvent", "UsageUpdate", "Finished"]


def test_async_callback_in_a_sync_call_runs_to_completion() -> None:
    seen: list[str] = []

    async def cb(event: StreamEvent) -> None:
        seen.append(type(event).__name__)

    ChatClient.create(ScriptedChatModel(["x"])).prompt("q").on_event(cb).call().content()
    assert seen == ["UsageUpdate", "Finished"]


def test_default_on_event_applies_to_every_request_and_stream_callbacks_see_deltas() -> None:
    seen: list[StreamEvent] = []
    client = ChatClient.builder(ScriptedChatModel(["x", ["a", "b"]])).default_on_event(seen.append).build()
    client.prompt("q").call().content()
    assert kinds(seen) == ["UsageUpdate", "Finished"]
    seen.clear()
    consumed = list(client.prompt("q").stream().events())
    assert seen == consumed


def test_callback_errors_propagate() -> None:
    def bad(event: StreamEvent) -> None:
        raise RuntimeError("callback broke")

    with pytest.raises(RuntimeError, match="callback broke"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("q").on_event(bad).call().content()


def test_on_event_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="callable"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("q").on_event("print")  # type: ignore[arg-type]


def test_response_events_after_a_blocking_call_log_the_tool_calls() -> None:
    calls = AssistantMessage(None, (ToolCall("c1", "add", '{"a": 1, "b": 1}'),))
    model = ScriptedChatModel([calls, "2"])
    response = ChatClient.create(model).prompt("1+1").tools(add).call().chat_client_response()
    assert [(type(e).__name__, getattr(e, "name", None)) for e in response.events][:2] == [
        ("ToolCallStarted", "add"),
        ("ToolCallFinished", "add"),
    ]


def test_usage_update_carries_the_summed_usage_of_a_tool_loop() -> None:
    calls = AssistantMessage(None, (ToolCall("c1", "add", '{"a": 1, "b": 1}'),))
    first = ChatResponse(
        (Generation(calls, GenerationMetadata("tool_calls")),), ChatResponseMetadata(usage=Usage(10, 1))
    )
    second = ChatResponse.of_text("2", usage=Usage(20, 2))
    events = list(ChatClient.create(ScriptedChatModel([first, second])).prompt("1+1").tools(add).stream().events())
    usage = [e for e in events if isinstance(e, UsageUpdate)]
    assert usage[-1].usage.prompt_tokens == 30 and usage[-1].usage.completion_tokens == 3


@pytest.mark.parametrize("mode", ["acall", "astream"])
def test_callbacks_run_on_the_event_loop_even_for_events_emitted_in_worker_threads(mode: str) -> None:
    # the memory advisors load history with asyncio.to_thread: their event is emitted off the loop
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(ScriptedChatModel(["x"])).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    threads: list[tuple[str, int]] = []

    def record(event: StreamEvent) -> None:
        threads.append((event.kind, threading.get_ident()))

    async def go() -> int:
        spec = client.prompt("q").on_event(record)
        if mode == "acall":
            await spec.acall().content()
        else:
            async for _ in spec.astream().events():
                pass
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert threads[0][0] == "advisor"
    assert {t for _, t in threads} == {loop_thread}


class ClosableModel(BaseChatModel):
    """An async stream that records whether its cleanup ran."""

    def __init__(self) -> None:
        self.closed = False

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        try:
            for i in range(100):
                yield ChatResponse((Generation(AssistantMessage(f"w{i} ")),))
        finally:
            self.closed = True


@pytest.mark.parametrize("reader", ["events", "content"])
def test_aclose_runs_the_model_streams_cleanup_at_once_through_every_advisor(reader: str) -> None:
    model = ClosableModel()
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    advisors = [MessageChatMemoryAdvisor(memory), Emitting("a"), Emitting("b")]

    async def go() -> None:
        spec = ChatClient.create(model).prompt("q").advisors(*advisors).astream()
        stream = spec.events() if reader == "events" else spec.content()
        async for item in stream:
            if isinstance(item, (str, TextDelta)):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        # no sleep, no further loop iteration: the innermost stream is already closed
        assert model.closed

    asyncio.run(go())
    assert [m.text for m in memory.get("default")] == ["q"]

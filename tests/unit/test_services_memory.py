"""ai_service memory: MemoryId picks the conversation, memory/memory_provider, serialised calls per id."""

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Protocol

import pytest

from chatclient import AssistantMessage, ChatClient, ChatResponse, Prompt, UserMessage
from chatclient.memory import MessageWindowChatMemory
from chatclient.models.base import BaseChatModel
from chatclient.services import MemoryId, ai_service, evict_memory
from chatclient.testing import ScriptedChatModel


class Chat(Protocol):
    def chat(self, message: str, user: MemoryId[str] = "default") -> str: ...

    async def achat(self, message: str, user: MemoryId[str] = "default") -> str: ...

    def stream(self, message: str, user: MemoryId[str] = "default") -> Iterator[str]: ...

    def astream(self, message: str, user: MemoryId[str] = "default") -> AsyncIterator[str]: ...

    def anonymous(self, message: str) -> str: ...


def turns(prompt: Prompt) -> list[str]:
    return [m.text for m in prompt.messages]


def test_same_id_shares_history_and_ids_are_isolated():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Hi Ada", "You are Ada", "Hi Bob"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    svc.chat("I am Ada", user="ada")
    svc.chat("Who am I?", user="ada")
    assert turns(model.last_prompt) == ["I am Ada", "Hi Ada", "Who am I?"]
    svc.chat("I am Bob", user="bob")
    assert turns(model.last_prompt) == ["I am Bob"]
    assert [m.text for m in memory.get("ada")] == ["I am Ada", "Hi Ada", "Who am I?", "You are Ada"]


def test_no_memory_id_uses_default_conversation():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["one", "two"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    svc.anonymous("first")
    svc.chat("second")  # MemoryId parameter left at its default
    assert turns(model.last_prompt) == ["first", "one", "second"]
    assert len(memory.get("default")) == 4


def test_int_memory_ids_and_bad_ids():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["a"])

    class Numbered(Protocol):
        def chat(self, message: str, user: MemoryId[int]) -> str: ...

    svc = ai_service(Numbered, client=ChatClient.create(model), memory=memory)
    svc.chat("hi", 7)
    assert len(memory.get("7")) == 2
    with pytest.raises(ValueError, match="conversation id cannot be empty"):
        ai_service(Chat, client=ChatClient.create(model), memory=memory).chat("x", user=" ")
    with pytest.raises(TypeError, match="must be a str, int or UUID"):
        svc.chat("x", None)


def test_memory_provider_makes_one_memory_per_id():
    made: dict[str, MessageWindowChatMemory] = {}

    def provider(memory_id):
        made[memory_id] = MessageWindowChatMemory(max_messages=10)
        return made[memory_id]

    model = ScriptedChatModel(["a1", "b1", "a2"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory_provider=provider)
    svc.chat("hello", user="a")
    svc.chat("hello", user="b")
    svc.chat("again", user="a")
    assert sorted(made) == ["a", "b"]  # one memory each, made once
    assert turns(model.last_prompt) == ["hello", "a1", "again"]
    assert [m.text for m in made["b"].get("b")] == ["hello", "b1"]


def test_memory_provider_must_return_a_memory():
    svc = ai_service(Chat, client=ChatClient.create(ScriptedChatModel(["x"])), memory_provider=lambda i: None)
    with pytest.raises(TypeError, match="must return a ChatMemory"):
        svc.chat("hi")


def test_evict_memory():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["a", "b"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    svc.chat("hi", user="u")
    evict_memory(svc, "u")
    assert memory.get("u") == []
    svc.chat("again", user="u")
    assert turns(model.last_prompt) == ["again"]
    with pytest.raises(TypeError):
        evict_memory(object(), "u")


def test_async_and_streaming_calls_use_memory():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["one", ["tw", "o"], ["thr", "ee"], "four"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)

    async def run():
        await svc.achat("1", user="u")
        assert list(svc.stream("2", user="u")) == ["tw", "o"]
        assert [t async for t in svc.astream("3", user="u")] == ["thr", "ee"]
        return await svc.achat("4", user="u")

    assert asyncio.run(run()) == "four"
    assert turns(model.last_prompt) == ["1", "one", "2", "two", "3", "three", "4"]


class SlowEcho(BaseChatModel):
    """Answers "A:<question>" after a pause, recording how much history each call saw."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.seen: list[int] = []
        self.lock = threading.Lock()

    def _answer(self, prompt: Prompt) -> ChatResponse:
        with self.lock:
            self.seen.append(len(prompt.messages))
        return ChatResponse.of_text("A:" + prompt.user_message.text)

    def call(self, prompt: Prompt) -> ChatResponse:
        time.sleep(self.delay)
        return self._answer(prompt)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        await asyncio.sleep(self.delay)
        return self._answer(prompt)


def assert_not_interleaved(memory: MessageWindowChatMemory, conversation: str, n: int, seen: list[int]) -> None:
    history = memory.get(conversation)
    assert len(history) == 2 * n
    for question, answer in zip(history[::2], history[1::2], strict=True):
        assert isinstance(question, UserMessage) and isinstance(answer, AssistantMessage)
        assert answer.text == "A:" + question.text
    # every call saw all the turns before it: 1, 3, 5, ... messages, each exactly once
    assert sorted(seen) == [2 * k + 1 for k in range(n)]


def test_many_threads_on_one_id_are_serialised():
    n = 12
    memory = MessageWindowChatMemory(max_messages=100)
    model = SlowEcho(0.005)
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            svc.chat(f"q{i}", user="shared")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert_not_interleaved(memory, "shared", n, model.seen)


def test_different_ids_run_in_parallel():
    memory = MessageWindowChatMemory()
    model = SlowEcho(0.2)
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    threads = [threading.Thread(target=svc.chat, args=("q", f"user{i}")) for i in range(4)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.perf_counter() - start < 0.6  # serialised, four calls would take 0.8 s
    assert model.seen == [1, 1, 1, 1]


def test_many_tasks_on_one_id_are_serialised():
    n = 10
    memory = MessageWindowChatMemory(max_messages=100)
    model = SlowEcho(0.002)
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)

    async def run() -> None:
        await asyncio.gather(*(svc.achat(f"q{i}", user="shared") for i in range(n)))

    asyncio.run(run())
    assert_not_interleaved(memory, "shared", n, model.seen)


def test_serialised_across_event_loops_and_threads():
    # Two threads, each with its own event loop, plus plain sync calls: all on one conversation.
    memory = MessageWindowChatMemory(max_messages=200)
    model = SlowEcho(0.003)
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)

    def loop_worker(tag: str) -> None:
        async def run() -> None:
            await asyncio.gather(*(svc.achat(f"{tag}{i}", user="shared") for i in range(4)))

        asyncio.run(run())

    def sync_worker() -> None:
        for i in range(4):
            svc.chat(f"s{i}", user="shared")

    threads = [threading.Thread(target=loop_worker, args=(t,)) for t in ("x", "y")]
    threads.append(threading.Thread(target=sync_worker))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_not_interleaved(memory, "shared", 12, model.seen)
    # a later event loop reuses nothing bound to the finished ones
    assert asyncio.run(svc.achat("last", user="shared")) == "A:last"


def test_cancelled_task_releases_the_conversation():
    memory = MessageWindowChatMemory()
    model = SlowEcho(0.5)
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)

    async def run() -> str:
        task = asyncio.create_task(svc.achat("slow", user="u"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        model.delay = 0.0
        return await asyncio.wait_for(svc.achat("next", user="u"), timeout=2)

    assert asyncio.run(run()) == "A:next"
    assert svc.chat("sync after", user="u") == "A:sync after"


def test_stream_holds_the_conversation_until_it_ends():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([["a", "b"], "c"])
    svc = ai_service(Chat, client=ChatClient.create(model), memory=memory)
    stream = svc.stream("first", user="u")
    assert next(stream) == "a"
    result: list[str] = []
    other = threading.Thread(target=lambda: result.append(svc.chat("second", user="u")))
    other.start()
    other.join(timeout=0.2)
    assert other.is_alive() and result == []  # waits for the stream
    assert list(stream) == ["b"]
    other.join(timeout=2)
    assert result == ["c"]
    assert turns(model.last_prompt) == ["first", "ab", "second"]


def test_memory_provider_in_async_and_streaming_calls():
    made: dict[str, MessageWindowChatMemory] = {}

    def provider(memory_id):
        return made.setdefault(memory_id, MessageWindowChatMemory())

    model = ScriptedChatModel(["a", ["b"], ["c"]])
    svc = ai_service(Chat, client=ChatClient.create(model), memory_provider=provider)

    async def run():
        await svc.achat("1", user="p")
        return [t async for t in svc.astream("3", user="q")]

    assert asyncio.run(run()) == ["b"]
    assert [m.text for m in made["p"].get("p")] == ["1", "a"]
    assert [m.text for m in made["q"].get("q")] == ["3", "b"]
    assert list(svc.stream("2", user="p")) == ["c"]
    assert turns(model.last_prompt) == ["1", "a", "2"]

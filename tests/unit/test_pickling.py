"""Pickling: models, ChatClient, built-in advisors and in-memory memories travel to workers; live resources refuse."""

from __future__ import annotations

import pickle
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import advisors as A
from chatclient import ChatClient
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.memory.sqlite import SqliteChatMemoryRepository
from chatclient.messages import UserMessage
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel, OpenAIEmbeddingModel
from chatclient.options import ChatOptions
from chatclient.testing import ScriptedChatModel

ENV_KEY = "sk-from-the-environment-0001"
WORKER_KEY = "sk-the-workers-own-key-0002"


def roundtrip(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj))


def test_provider_models_are_equal_after_a_roundtrip() -> None:
    models = [
        OpenAIChatModel("gpt-4o-mini", api_key="sk-explicit-000111", options=ChatOptions(temperature=0.2)),
        OpenAIChatModel("local", base_url="http://127.0.0.1:9/v1", max_retries=5, timeout=3.0),
        AnthropicChatModel("claude-x", api_key="sk-ant-explicit-000", base_url="http://127.0.0.1:9"),
        OllamaChatModel("llama3", base_url="http://127.0.0.1:9"),
        OpenAIEmbeddingModel(api_key="sk-explicit-000111", base_url="http://127.0.0.1:9/v1"),
    ]
    for model in models:
        copy = roundtrip(model)
        assert copy == model and copy is not model and type(copy) is type(model)
        assert copy._http.base_url == model._http.base_url
        assert getattr(copy, "default_options", None) == getattr(model, "default_options", None)
    assert models[0] != roundtrip(OpenAIChatModel("gpt-4o-mini", api_key="sk-explicit-000111"))  # other options


def test_an_environment_key_is_read_again_where_unpickled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    model = OpenAIChatModel("gpt-4o-mini")
    data = pickle.dumps(model)
    assert ENV_KEY.encode() not in data
    monkeypatch.setenv("OPENAI_API_KEY", WORKER_KEY)  # the worker's environment
    copy = pickle.loads(data)
    assert copy._http._headers["authorization"] == f"Bearer {WORKER_KEY}"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):  # the worker has none: said where it is unpickled
        pickle.loads(data)


def test_an_explicit_key_travels() -> None:
    model = AnthropicChatModel("claude-x", api_key="sk-ant-explicit-key-42")
    data = pickle.dumps(model)
    assert b"sk-ant-explicit-key-42" in data  # documented: anyone who can read the pickle can read it
    assert roundtrip(model)._http._headers["x-api-key"] == "sk-ant-explicit-key-42"


def test_live_resources_refuse_with_what_to_pass_instead() -> None:
    with httpx.Client() as http:
        model = OpenAIChatModel("gpt-4o-mini", api_key="sk-x-0000000", http_client=http)
        with pytest.raises(TypeError, match=r"http_client=.*pass timeout=, headers=, max_retries="):
            pickle.dumps(model)
    with pytest.raises(TypeError, match="pass a file path"):
        pickle.dumps(SqliteChatMemoryRepository(":memory:"))


def test_a_used_model_pickles_without_its_pool() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-x-0000000", base_url="http://127.0.0.1:9/v1")
    model._http._sync_client()  # a pool with its lock now exists
    copy = roundtrip(model)
    assert copy == model and copy._http._stripes == [None] * len(copy._http._stripes)


def test_sqlite_file_repository_travels_as_its_path(tmp_path: Any) -> None:
    repo = SqliteChatMemoryRepository(tmp_path / "chat.db")
    repo.save_all("c1", [UserMessage("hello")])
    copy = roundtrip(repo)
    assert copy.path == repo.path and [m.text for m in copy.find("c1")] == ["hello"]
    repo.close()
    copy.close()


class Person(BaseModel):
    name: str


def test_client_with_built_in_advisors_and_memory_content() -> None:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=7)
    memory.add("c1", [UserMessage("remember me")])
    advisors = [
        A.SimpleLoggerAdvisor(),
        A.ReReadingAdvisor(),
        A.SafeGuardAdvisor(["forbidden"]),
        A.MessageChatMemoryAdvisor(memory),
        A.PromptChatMemoryAdvisor(memory),
        A.StructuredOutputValidationAdvisor(Person),
        A.PromptCachingAdvisor(ttl="1h"),
        A.BudgetAdvisor(max_tokens=1000, budget=A.Budget(max_tokens=5000)),
        A.ToolApprovalAdvisor(),
        A.ToolSearchAdvisor(),
    ]
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-explicit-000111", base_url="http://127.0.0.1:9/v1")
    client = (
        ChatClient.builder(model)
        .default_system("Be {{ tone }}.", params={"tone": "brief"})
        .default_advisors(*advisors)
        .build()
    )
    copy = roundtrip(client)
    assert copy.model == model
    assert [type(a) for a in copy._defaults.advisors] == [type(a) for a in advisors]
    assert [a.order for a in copy._defaults.advisors] == [a.order for a in advisors]
    assert copy._defaults.system_text == client._defaults.system_text
    travelled = copy._defaults.advisors[3].chat_memory
    assert [m.text for m in travelled.get("c1")] == ["remember me"] and travelled.max_messages == 7


def test_unpickled_client_runs() -> None:
    client = ChatClient.builder(ScriptedChatModel(["hi there"])).default_advisors(A.ReReadingAdvisor()).build()
    copy = roundtrip(client)
    assert copy.prompt("hello").call().content() == "hi there"
    assert "Read the question again" in copy.model.last_prompt.user_message.text


@pytest.mark.integration
def test_unpickled_model_rebuilds_its_connections() -> None:
    from tests.support.loopback import LoopbackServer, Reply, openai_completion

    with LoopbackServer() as server:
        server.set_default("/v1/chat/completions", Reply(json=openai_completion("pong")))
        model = OpenAIChatModel("gpt-test", api_key="sk-explicit-000111", base_url=server.url + "/v1")
        client = ChatClient.builder(model).build()
        assert client.prompt("ping").call().content() == "pong"
        copy = roundtrip(client)
        assert copy.prompt("ping").call().content() == "pong"
        assert len(server.requests_to("/v1/chat/completions")) == 2
        assert server.requests_to("/v1/chat/completions")[1].headers["authorization"] == "Bearer sk-explicit-000111"


def test_wrappers_breakers_and_stores() -> None:
    from chatclient.rag import SimpleVectorStore
    from chatclient.rag.stores.sqlite import SqliteVectorStore
    from chatclient.resilience import CircuitBreaker, FallbackChatModel, RateLimiter

    fallback = FallbackChatModel(
        ScriptedChatModel(["primary"]), ScriptedChatModel(["backup"]), on=("rate_limit", TimeoutError)
    )
    copy = roundtrip(fallback)
    assert copy._should_fall_back(TimeoutError()) and not copy._should_fall_back(ValueError())
    assert ChatClient.create(copy).prompt("hi").call().content() == "primary"
    breaker = CircuitBreaker(failure_threshold=2)
    assert roundtrip(breaker).failure_threshold == 2
    limited = roundtrip(RateLimiter(requests_per_minute=600).wrap(ScriptedChatModel(["ok"])))
    assert ChatClient.create(limited).prompt("hi").call().content() == "ok"

    embedding = OpenAIEmbeddingModel(api_key="sk-explicit-000111", base_url="http://127.0.0.1:9/v1")
    store = SimpleVectorStore(embedding)
    assert roundtrip(store).embedding_model == embedding
    with pytest.raises(TypeError, match="pass its path"):
        pickle.dumps(SqliteVectorStore(":memory:", embedding))


def test_embedded_model_travels_as_its_arguments() -> None:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")
    from chatclient.models.llamacpp import LlamaCppChatModel
    from chatclient.models.model_files import default_model_path

    model = LlamaCppChatModel(default_model_path(), n_ctx=512, seed=7)
    data = pickle.dumps(model)
    assert len(data) < 10_000  # the weights are loaded again where it lands, never pickled
    copy = pickle.loads(data)
    assert copy == model and copy.model_path == model.model_path and copy.seed == 7


def test_server_backed_memories_travel_as_their_address() -> None:
    from chatclient.memory.postgres import PostgresChatMemoryRepository
    from chatclient.memory.redis import RedisChatMemoryRepository
    from chatclient.rag import SearchRequest

    redis_repo = RedisChatMemoryRepository("redis://127.0.0.1:6379/0", prefix="x:", ttl=60)
    copy = roundtrip(redis_repo)
    assert copy == redis_repo and copy.prefix == "x:" and copy.ttl == 60 and copy.client is not redis_repo.client
    with pytest.raises(TypeError, match="pass its url="):
        pickle.dumps(RedisChatMemoryRepository(client=redis_repo.client))
    pg = PostgresChatMemoryRepository("postgresql://postgres@127.0.0.1:5432/test", table="t1")
    assert roundtrip(pg) == pg and roundtrip(pg).table == "t1"
    request = SearchRequest("capital", top_k=2, filter_expression="lang == 'en'")
    assert roundtrip(request) == request


def test_a_prompt_and_a_used_scripted_model_pickle() -> None:
    import pickle

    from chatclient import ChatClient
    from chatclient.messages import SystemMessage, UserMessage
    from chatclient.options import ChatOptions
    from chatclient.prompt import Prompt, ToolDefinition
    from chatclient.testing import ScriptedChatModel

    prompt = Prompt(
        [SystemMessage("terse"), UserMessage("hi")],
        ChatOptions(temperature=0.0),
        tools=[ToolDefinition("t", "a tool", {"type": "object", "properties": {}})],
    )
    assert pickle.loads(pickle.dumps(prompt)) == prompt
    model = ScriptedChatModel(["a", "b"])
    assert ChatClient.create(model).prompt("x").call().content() == "a"
    copy = pickle.loads(pickle.dumps(model))
    assert copy.prompts[0].user_message.text == "x"


def test_a_secret_passed_positionally_is_masked_where_the_arguments_are_recorded() -> None:
    # Keyword secrets were wrapped; a URL with a password given as the first positional argument
    # must not show in repr(vars(...)) either, and must still travel and compare equal.
    from chatclient.memory.redis import RedisChatMemoryRepository

    url = "redis://:hunter2-redis-password@127.0.0.1:6379/0"
    repo = RedisChatMemoryRepository(url, prefix="x:")
    assert "hunter2-redis-password" not in repr(vars(repo))
    copy = roundtrip(repo)
    assert copy == repo and copy == RedisChatMemoryRepository(url, prefix="x:") and copy.prefix == "x:"
    assert "hunter2-redis-password" not in repr(vars(copy))

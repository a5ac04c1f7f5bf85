"""Conversations and suspended agent runs are bound to the principal the ``auth`` hook returned.

Two users over real HTTP (Uvicorn on loopback, the ``openai`` SDK and httpx) send the SAME
conversation id: each sees only their own memory and only their own suspended run.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai", reason="needs the dev extra (the openai SDK is the test client)")
pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")

import httpx
import openai

from advisors.memory import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.agents import agent_function, human_input, sequence
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.serving import openai_app
from chatclient.serving._edge import namespaced_conversation_id
from chatclient.testing import ScriptedChatModel
from tests.support.serving import running

SHARED_ID = {"X-Conversation-Id": "conv-1"}


def _auth(request: Any) -> str | None:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return {"key-alice": "alice", "key-bob": "bob"}.get(token)


def sdk(url: str, key: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def _memory_client(model: ScriptedChatModel) -> tuple[ChatClient, MessageWindowChatMemory]:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    return ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build(), memory


def _say(client: Any, text: str) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="chatclient", messages=[{"role": "user", "content": text}], extra_headers=SHARED_ID
    )


def test_two_users_with_one_conversation_id_never_share_memory() -> None:
    model = ScriptedChatModel(["noted", "noted too", "you are Alice", "you are Bob"])
    client, memory = _memory_client(model)
    with running(openai_app(client, auth=_auth)) as url:
        alice, bob = sdk(url, "key-alice"), sdk(url, "key-bob")
        first = _say(alice, "My secret is 1234")
        _say(bob, "I am Bob")
        _say(alice, "Who am I?")
        alice_prompt = [m.text for m in model.last_prompt.messages]
        _say(bob, "What is Alice's secret?")
        bob_prompt = [m.text for m in model.last_prompt.messages]
    assert first.headers["x-conversation-id"] == "conv-1"  # the caller's own id comes back unchanged
    assert alice_prompt == ["My secret is 1234", "noted", "Who am I?"]
    assert bob_prompt == ["I am Bob", "noted too", "What is Alice's secret?"]  # nothing of Alice's
    assert memory.get("conv-1") == []  # the caller's id alone is nobody's conversation
    stored = set(memory.repository.find_conversation_ids())
    assert stored == {namespaced_conversation_id("alice", "conv-1"), namespaced_conversation_id("bob", "conv-1")}


def test_without_auth_the_conversation_id_is_the_callers() -> None:
    model = ScriptedChatModel(["a", "b"])
    client, memory = _memory_client(model)
    with running(openai_app(client)) as url:
        _say(sdk(url, "unused"), "hello")
    assert [m.text for m in memory.get("conv-1")] == ["hello", "a"]


def test_a_suspended_agent_run_is_resumed_only_by_its_user() -> None:
    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Welcome, {name}."

    flow = sequence(human_input(question="Who are you?", output_key="name"), greet, output_key="greeting")
    with running(openai_app(flow, auth=_auth)) as url:
        alice, bob = sdk(url, "key-alice"), sdk(url, "key-bob")
        assert _say(alice, "hello").parse().choices[0].message.content == "Who are you?"
        # Bob sends Alice's conversation id: he starts his own run, he does not answer hers.
        assert _say(bob, "Mallory").parse().choices[0].message.content == "Who are you?"
        assert _say(alice, "Ada").parse().choices[0].message.content == "Welcome, Ada."
        assert _say(bob, "Bob").parse().choices[0].message.content == "Welcome, Bob."


def test_conversation_namespace_hook_names_the_user() -> None:
    from chatclient.serving._edge import Edge

    class User:
        def __init__(self, tenant: str, login: str) -> None:
            self.tenant, self.login = tenant, login

    def namespace(user: User) -> str:
        return f"{user.tenant}/{user.login}"

    edge = Edge(auth=lambda request: None, conversation_namespace=namespace)
    key = edge.conversation_key("c", User("acme", "ann"))
    assert key == namespaced_conversation_id("acme/ann", "c")
    assert key != edge.conversation_key("c", User("acme", "bob"))
    assert edge.conversation_key("c", User("acme", "ann")) == key  # deterministic
    with pytest.raises(TypeError):
        Edge(conversation_namespace="tenant")  # type: ignore[arg-type]


def test_principal_identities_from_str_id_attribute_and_mapping() -> None:
    from chatclient.serving._edge import principal_identity

    class Principal:
        id = 42

    assert principal_identity("ann") == "ann"
    assert principal_identity(Principal()) == "42"
    assert principal_identity({"id": "u-7", "role": "admin"}) == "u-7"
    for nobody in (True, object(), {"name": "ann"}, ""):
        with pytest.raises(TypeError, match="conversation_namespace"):
            principal_identity(nobody)


def test_namespaced_ids_cannot_be_forged_with_separators() -> None:
    # Without hashing, identity "a:b" + id "c" and identity "a" + id "b:c" would meet at "a:b:c".
    assert namespaced_conversation_id("a:b", "c") != namespaced_conversation_id("a", "b:c")
    assert namespaced_conversation_id("a", "b") != namespaced_conversation_id("ab", "")
    key = namespaced_conversation_id("alice", "conv-1")
    assert key.startswith("p-") and key.endswith(":conv-1") and "alice" not in key


def test_a_principal_naming_nobody_with_a_conversation_id_is_a_500_not_a_shared_conversation() -> None:
    model = ScriptedChatModel(["no conversation", "never"])
    client, memory = _memory_client(model)
    with running(openai_app(client, auth=lambda request: True)) as url:
        body = {"model": "chatclient", "messages": [{"role": "user", "content": "hi"}]}
        plain = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
        refused = httpx.post(url + "/v1/chat/completions", json=body, headers=SHARED_ID, timeout=10)
    assert plain.status_code == 200  # without an id nothing is shared: the turn runs
    assert refused.status_code == 500 and refused.json()["error"]["code"] == "internal_error"
    assert memory.get("conv-1") == []


# -- the principal inside an agent's model calls ---------------------------------------------------------


def test_a_budget_per_principal_refuses_inside_an_agent_target_with_a_429() -> None:
    from advisors.budget import Budget, BudgetAdvisor
    from chatclient.agents import agent
    from chatclient.request import ContextKeys

    # Without the principal in the agent's calls every user would spend the one "nobody" budget.
    budget = Budget(max_tokens=1, period=None, key=lambda req: str(req.context.get(ContextKeys.PRINCIPAL, "nobody")))
    model = ScriptedChatModel(["for alice", "for bob", "never"])
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(budget=budget)).build()
    helper = agent(client, name="helper", user="{{ message }}", output_key="answer")
    with running(openai_app(helper, auth=_auth)) as url:
        alice, bob = sdk(url, "key-alice"), sdk(url, "key-bob")
        first = alice.chat.completions.create(model="chatclient", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError) as refused:
            alice.chat.completions.create(model="chatclient", messages=[{"role": "user", "content": "again"}])
        other = bob.chat.completions.create(model="chatclient", messages=[{"role": "user", "content": "hi"}])
    assert first.choices[0].message.content == "for alice"
    assert refused.value.response.status_code == 429
    assert refused.value.response.json()["error"]["code"] == "budget_exceeded"
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert other.choices[0].message.content == "for bob"

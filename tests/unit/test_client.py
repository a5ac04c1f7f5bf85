"""The fluent client: builder defaults, Spring's merge rules, eager validation, terminal methods."""

from __future__ import annotations

import asyncio

import pytest

from chatclient import (
    AssistantMessage,
    ChatClient,
    ChatOptions,
    ChatResponse,
    Media,
    Prompt,
    SystemMessage,
    UserMessage,
)
from chatclient.errors import ChatClientError
from chatclient.testing import RecordingAdvisor, ScriptedChatModel


def test_create_and_simple_call() -> None:
    model = ScriptedChatModel(["Hello!"])
    assert ChatClient.create(model).prompt("Hi").call().content() == "Hello!"
    assert model.last_prompt.messages == (UserMessage("Hi"),)


def test_model_is_required() -> None:
    with pytest.raises(ValueError):
        ChatClient.create(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ChatClient.builder(None)  # type: ignore[arg-type]


def test_message_order_system_messages_user() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_system("instructions").build()
    client.prompt().user("my question").messages(
        SystemMessage("other instructions"), UserMessage("earlier")
    ).call().content()
    assert model.last_prompt.messages == (
        SystemMessage("instructions"),
        SystemMessage("other instructions"),
        UserMessage("earlier"),
        UserMessage("my question"),
    )


def test_prompt_string_is_a_message_and_user_text_follows() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient.create(model).prompt("first").user("second").call().content()
    assert [m.text for m in model.last_prompt.messages] == ["first", "second"]


def test_prompt_object_options_replace_defaults() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_options(ChatOptions(model="default", temperature=0.1)).build()
    client.prompt(Prompt([UserMessage("q")], ChatOptions(model="special"))).call().content()
    assert model.last_prompt.options == ChatOptions(model="special")


def test_text_replaces_params_and_metadata_merge() -> None:
    model = ScriptedChatModel(["ok"])
    client = (
        ChatClient.builder(model)
        .default_system("Default {{ a }} {{ b }}", params={"a": "1", "b": "2"}, metadata={"m1": 1})
        .build()
    )
    client.prompt("q").system("New {{ a }}, {{ b }}", params={"b": "B"}, metadata={"m2": 2}).call().content()
    system = model.last_prompt.system_message
    assert system.text == "New 1, B"
    assert dict(system.metadata) == {"m1": 1, "m2": 2}


def test_user_params_media_and_metadata() -> None:
    model = ScriptedChatModel(["ok"])
    img = Media("image/png", "https://example.com/cat.png")
    client = ChatClient.builder(model).default_user("Describe {{ thing }}", params={"thing": "x"}).build()
    client.prompt().user(params={"thing": "this image"}, media=[img], metadata={"src": "test"}).call().content()
    user = model.last_prompt.user_message
    assert user.text == "Describe this image"
    assert user.media == (img,)
    assert user.metadata["src"] == "test"


def test_options_replace_and_model_sees_them() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_options(ChatOptions(temperature=0.3)).build()
    client.prompt("q").options(ChatOptions(max_tokens=5)).call().content()
    assert model.last_prompt.options == ChatOptions(max_tokens=5)
    client2 = ChatClient.builder(ScriptedChatModel(["ok"])).default_options(ChatOptions(temperature=0.3)).build()
    spec = client2.prompt("q")
    assert spec.to_request().prompt.options == ChatOptions(temperature=0.3)


def test_advisors_append_and_params_merge() -> None:
    log: list[str] = []
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_advisors(RecordingAdvisor("d", log), params={"a": 1, "b": 1}).build()
    cr = client.prompt("q").advisors(RecordingAdvisor("r", log), params={"b": 2}).call().chat_client_response()
    assert log == ["d:before", "r:before", "r:after", "d:after"]
    assert cr.context["a"] == 1 and cr.context["b"] == 2


@pytest.mark.parametrize(
    "action",
    [
        lambda s: s.user(""),
        lambda s: s.user("   "),
        lambda s: s.system(""),
        lambda s: s.user(None),
        lambda s: s.user("x", metadata={"": 1}),
        lambda s: s.user("x", metadata={None: 1}),
        lambda s: s.user("x", metadata={"k": None}),
        lambda s: s.user("x", params={"k": None}),
        lambda s: s.system("x", params={"": "v"}),
        lambda s: s.advisors(None),
        lambda s: s.messages(None),
        lambda s: s.options(None),
        lambda s: s.tool_context(None),
        lambda s: s.tool_context({"k": None}),
        lambda s: s.template_renderer(None),
        lambda s: s.tools(None),
        lambda s: s.user("x", media=[None]),
    ],
)
def test_bad_arguments_fail_at_the_spec_call(action: object) -> None:
    model = ScriptedChatModel([])
    spec = ChatClient.create(model).prompt()
    with pytest.raises(ValueError):
        action(spec)  # type: ignore[operator]
    assert model.prompts == []


def test_empty_prompt_text_is_rejected() -> None:
    with pytest.raises(ValueError):
        ChatClient.create(ScriptedChatModel([])).prompt("")


def test_prompt_without_messages_fails_clearly() -> None:
    with pytest.raises(ValueError, match="empty"):
        ChatClient.create(ScriptedChatModel([])).prompt().call()


def test_mutate_copies_defaults() -> None:
    log: list[str] = []
    model = ScriptedChatModel(["a", "b", "c"])
    client = ChatClient.builder(model).default_system("one").default_advisors(RecordingAdvisor("x", log)).build()
    builder = client.mutate().default_system("two").default_advisors(RecordingAdvisor("y", log))
    other = builder.build()
    client.prompt("q").call().content()
    assert model.last_prompt.system_message.text == "one"
    assert log == ["x:before", "x:after"]
    other.prompt("q").call().content()
    assert model.last_prompt.system_message.text == "two"
    # changing the builder after build() changes neither client
    builder.default_system("three")
    client.prompt("q").call().content()
    assert model.last_prompt.system_message.text == "one"


def test_spec_changes_never_leak_into_client_defaults() -> None:
    model = ScriptedChatModel(["a", "b"])
    client = ChatClient.builder(model).default_system("base", params={"k": "v"}).build()
    client.prompt("q").system(params={"extra": "e"}).advisors(RecordingAdvisor("r", [])).call().content()
    client.prompt("q2").call().content()
    request_two = model.prompts[1]
    assert [m.text for m in request_two.messages] == ["base", "q2"]


def test_builder_builds_independent_clients() -> None:
    builder = ChatClient.builder(ScriptedChatModel([]))
    assert builder.build() is not builder.build()


def test_call_response_spec_runs_the_chain_once() -> None:
    model = ScriptedChatModel(["only one"])
    response = ChatClient.create(model).prompt("q").call()
    assert response.content() == "only one"
    assert response.chat_response() is not None
    assert response.chat_client_response().chat_response is not None
    assert len(model.prompts) == 1


def test_nothing_runs_until_a_terminal_method() -> None:
    model = ScriptedChatModel(["x"])
    spec = ChatClient.create(model).prompt("q")
    response = spec.call()
    stream = spec.stream()
    assert model.prompts == []
    assert response.content() == "x"
    del stream


def test_async_call_response_spec_runs_once() -> None:
    model = ScriptedChatModel(["async answer"])

    async def run() -> tuple[str | None, ChatResponse | None]:
        spec = ChatClient.create(model).prompt("q").acall()
        return await spec.content(), await spec.chat_response()

    content, response = asyncio.run(run())
    assert content == "async answer" and response is not None and response.text == "async answer"
    assert len(model.prompts) == 1


def test_content_none_when_model_returns_no_text() -> None:
    model = ScriptedChatModel([AssistantMessage(None)])
    assert ChatClient.create(model).prompt("q").call().content() is None


def test_stream_content_skips_empty_chunks() -> None:
    model = ScriptedChatModel([["", "a", "", "b", ""]])
    assert list(ChatClient.create(model).prompt("q").stream().content()) == ["a", "b"]


def test_stream_chat_response_and_client_response() -> None:
    model = ScriptedChatModel([["a", "b"], ["c"]])
    client = ChatClient.create(model)
    chunks = list(client.prompt("q").stream().chat_response())
    assert [c.text for c in chunks] == ["a", "b"]
    ccr = list(client.prompt("q").stream().chat_client_response())
    assert len(ccr) == 1 and ccr[0].chat_response is not None


def test_a_stream_is_consumed_once() -> None:
    model = ScriptedChatModel([["a"]])
    stream = ChatClient.create(model).prompt("q").stream()
    assert list(stream.content()) == ["a"]
    with pytest.raises(ChatClientError, match="already consumed"):
        list(stream.content())
    assert len(model.prompts) == 1


def test_async_stream_content() -> None:
    model = ScriptedChatModel([["x", "", "y"]])

    async def run() -> list[str]:
        return [t async for t in ChatClient.create(model).prompt("q").astream().content()]

    assert asyncio.run(run()) == ["x", "y"]


def test_many_concurrent_async_calls_share_one_client() -> None:
    model = ScriptedChatModel([f"answer {i}" for i in range(50)])
    client = ChatClient.create(model)

    async def run() -> list[str | None]:
        return await asyncio.gather(*(client.prompt(f"q{i}").acall().content() for i in range(50)))

    answers = asyncio.run(run())
    assert sorted(a for a in answers if a) == sorted(f"answer {i}" for i in range(50))


def test_client_is_reusable_and_builder_alias() -> None:
    assert ChatClient.Builder is type(ChatClient.builder(ScriptedChatModel([])))  # type: ignore[attr-defined]


async def test_an_unawaited_acall_content_passed_on_gets_a_pointed_message() -> None:
    # Issue 27.4: `text = client.prompt(q).acall().content()` without await, passed on as text.
    client = ChatClient.create(ScriptedChatModel(["Paris", "unused"]))
    pending = client.prompt("Capital of France?").acall().content()
    with pytest.raises(TypeError) as info:
        client.prompt(pending)  # type: ignore[arg-type]
    message = str(info.value)
    assert "un-awaited coroutine" in message and "AsyncCallResponseSpec.content" in message
    assert "await client.prompt(...).acall().content()" in message
    assert pending.cr_frame is None  # closed: no second "never awaited" warning
    for build in (
        lambda c: client.prompt().user(c),
        lambda c: client.prompt().system(c),
        lambda c: client.prompt().user("Say {{ x }}", params={"x": c}),
    ):
        with pytest.raises(TypeError, match=r"un-awaited coroutine"):
            build(client.prompt("q").acall().content())
    # awaited, the same value is fine
    text = await client.prompt("Capital of France?").acall().content()
    assert text == "Paris"

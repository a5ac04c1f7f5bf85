"""ai_service: prompt assembly and return types, in call, async and streaming forms (scripted model)."""

import asyncio
import enum
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Literal, Protocol

import pytest
from pydantic import BaseModel

from advisors import StructuredOutputValidationAdvisor
from chatclient import ChatClient, ChatClientResponse, ChatResponse, Media, ModelCapabilities, UserMessage
from chatclient.errors import OutputConversionError
from chatclient.services import Partial, Result, V, ai_service, system, user
from chatclient.testing import RecordingAdvisor, ScriptedChatModel


class Invoice(BaseModel):
    number: str
    total: float


class Sentiment(enum.Enum):
    POSITIVE = "positive"
    NEGATIVE = "negative"


class Assistant(Protocol):
    @system("You are a {{ role }}. Answer in {{ lang }}.")
    @user("Question: {{ question }}")
    def ask(self, question: str, role: V[str] = "teacher", lang: str = "English") -> str: ...

    def extract(self, text: str) -> Invoice:
        """Extract the invoice from this text: {{ text }}"""

    async def aask(self, question: str) -> str: ...

    def stream(self, question: str) -> Iterator[str]: ...

    def astream(self, question: str) -> AsyncIterator[str]: ...

    def classify(self, text: str) -> Sentiment: ...

    def label(self, text: str) -> Literal["spam", "ham"]: ...

    def is_question(self, text: str) -> bool: ...

    def count(self, text: str) -> int: ...

    def tags(self, text: str) -> list[str]: ...

    def detailed(self, text: str) -> Result[Invoice]: ...

    def detailed_text(self, text: str) -> Result[str]: ...

    def raw(self, text: str) -> ChatResponse: ...

    def whole(self, text: str) -> ChatClientResponse: ...

    def drafts(self, text: str) -> Iterator[Partial[Invoice]]: ...

    def adrafts(self, text: str) -> AsyncIterator[Partial[Invoice]]: ...

    async def aextract(self, text: str) -> Invoice: ...

    async def adetailed(self, text: str) -> Result[Invoice]: ...


def service(*script, **kwargs):
    model = ScriptedChatModel(list(script))
    return ai_service(Assistant, client=ChatClient.create(model), **kwargs), model


def texts(prompt):
    return [(m.type.value, m.text) for m in prompt.messages]


# -- prompt assembly -------------------------------------------------------------------------------


def test_system_and_user_templates_render_parameters_and_defaults():
    svc, model = service("ok")
    assert svc.ask("What is 2+2?") == "ok"
    assert texts(model.last_prompt) == [
        ("system", "You are a teacher. Answer in English."),
        ("user", "Question: What is 2+2?"),
    ]


def test_keyword_and_positional_arguments_bind_like_python():
    svc, model = service("a", "b")
    svc.ask("q1", "pirate", lang="French")
    assert texts(model.last_prompt)[0] == ("system", "You are a pirate. Answer in French.")
    svc.ask(question="q2", lang="German")
    assert texts(model.last_prompt) == [("system", "You are a teacher. Answer in German."), ("user", "Question: q2")]


def test_wrong_calls_raise_type_error_before_the_model_runs():
    svc, model = service()
    with pytest.raises(TypeError, match="missing required argument"):
        svc.ask()
    with pytest.raises(TypeError, match="unexpected keyword argument 'tone'"):
        svc.ask("q", tone="x")
    with pytest.raises(TypeError, match="multiple values"):
        svc.ask("q", question="again")
    with pytest.raises(TypeError, match="positional"):
        svc.ask("q", "r", "l", "extra")
    assert model.prompts == []


def test_argument_values_are_data_never_templates():
    svc, model = service("ok", "ok")
    svc.ask("{{ role }} {% for x in range(3) %}loop{% endfor %}", role="{{ lang }}")
    assert texts(model.last_prompt) == [
        ("system", "You are a {{ lang }}. Answer in English."),
        ("user", "Question: {{ role }} {% for x in range(3) %}loop{% endfor %}"),
    ]
    assert list(svc.stream("{{ question }}")) == ["ok"]  # no template: the argument is sent verbatim
    assert texts(model.last_prompt) == [("user", "{{ question }}")]


def test_docstring_is_the_user_template():
    svc, model = service('{"number": "A-1", "total": 9.5}')
    assert svc.extract("invoice A-1 over 9.50") == Invoice(number="A-1", total=9.5)
    user_text = model.last_prompt.user_message.text
    assert user_text.startswith("Extract the invoice from this text: invoice A-1 over 9.50")


def test_single_str_parameter_is_the_user_message_verbatim():
    svc, model = service("fine")
    assert asyncio.run(svc.aask("How are {you}?")) == "fine"
    assert texts(model.last_prompt) == [("user", "How are {you}?")]


def test_empty_user_message_argument_is_rejected():
    svc, _ = service()
    with pytest.raises(ValueError, match="'question' is the user message"):
        asyncio.run(svc.aask("  "))
    with pytest.raises(TypeError, match="'question' is the user message"):
        asyncio.run(svc.aask(42))


def test_v_renames_a_template_variable():
    class Renamed(Protocol):
        @user("Translate: {{ source_text }}")
        def translate(self, text: V["source_text"]) -> str: ...  # noqa: F821 - a variable name

        @user("Q: {{ q }}")
        def typed(self, question: V[str, "q"]) -> str: ...  # noqa: F821

    model = ScriptedChatModel(["x", "y"])
    svc = ai_service(Renamed, client=ChatClient.create(model))
    svc.translate("bonjour")
    assert model.last_prompt.user_message.text == "Translate: bonjour"
    svc.typed("why?")
    assert model.last_prompt.user_message.text == "Q: why?"


def test_system_template_unused_parameter_is_user_message():
    class Translator(Protocol):
        @system("Translate into {{ lang }}.")
        def translate(self, text: str, lang: str = "French") -> str: ...

    model = ScriptedChatModel(["Bonjour"])
    svc = ai_service(Translator, client=ChatClient.create(model))
    assert svc.translate("Hello") == "Bonjour"
    assert texts(model.last_prompt) == [("system", "Translate into French."), ("user", "Hello")]


def test_class_level_system_applies_to_every_method():
    @system("Be brief.")
    class Brief(Protocol):
        def one(self, q: str) -> str: ...

        @system("Be long.")
        def two(self, q: str) -> str: ...

    model = ScriptedChatModel(["a", "b"])
    svc = ai_service(Brief, client=ChatClient.create(model))
    svc.one("x")
    assert texts(model.last_prompt)[0] == ("system", "Be brief.")
    svc.two("x")
    assert texts(model.last_prompt)[0] == ("system", "Be long.")


def test_templates_from_files(tmp_path):
    (tmp_path / "sys.txt").write_text("You review {{ language }} code.", encoding="utf-8")
    (tmp_path / "user.txt").write_text("Review:\n{{ code }}", encoding="utf-8")

    class Reviewer(Protocol):
        @system(from_file=tmp_path / "sys.txt")
        @user(from_file=str(tmp_path / "user.txt"))
        def review(self, code: str, language: str = "Python") -> str: ...

    model = ScriptedChatModel(["LGTM"])
    svc = ai_service(Reviewer, client=ChatClient.create(model))
    assert svc.review("print(1)") == "LGTM"
    assert texts(model.last_prompt) == [("system", "You review Python code."), ("user", "Review:\nprint(1)")]


def test_system_message_provider_per_memory_id():
    from chatclient.memory import MessageWindowChatMemory
    from chatclient.services import MemoryId

    class Chat(Protocol):
        def chat(self, message: str, user: MemoryId[str] = "default") -> str: ...

    seen = []

    def provider(memory_id):
        seen.append(memory_id)
        return f"You talk to {memory_id}." if memory_id != "anon" else None

    model = ScriptedChatModel(["a", "b", "c"])
    svc = ai_service(
        Chat, client=ChatClient.create(model), memory=MessageWindowChatMemory(), system_message_provider=provider
    )
    svc.chat("hi", user="ada")
    assert texts(model.last_prompt)[0] == ("system", "You talk to ada.")
    svc.chat("hi", user="anon")
    assert model.last_prompt.messages[0].type.value == "user"
    svc.chat("hi")
    assert texts(model.last_prompt)[0] == ("system", "You talk to default.")
    assert seen == ["ada", "anon", "default"]


def test_media_arguments_are_attached_to_the_user_message():
    class Vision(Protocol):
        @user("Describe the {{ what }}.")
        def describe(self, what: str, image: Media, extra: list[Media] | None = None) -> str: ...

        def caption(self, image: Media) -> str: ...

    model = ScriptedChatModel(["a cat", "cats"])
    svc = ai_service(Vision, client=ChatClient.create(model))
    img = Media("image/png", b"\x89PNG")
    url = Media("image/jpeg", "https://example.invalid/cat.jpg")
    svc.describe("picture", img, extra=[url])
    message = model.last_prompt.user_message
    assert message.text == "Describe the picture." and message.media == (img, url)
    svc.caption(img)
    assert model.last_prompt.user_message == UserMessage("", (img,))
    with pytest.raises(TypeError, match="must hold Media"):
        svc.describe("x", "not media")


def test_builtin_date_variables():
    class Dated(Protocol):
        @system("Today is {{ current_date }}.")
        def ask(self, q: str) -> str: ...

    import datetime

    model = ScriptedChatModel(["ok"])
    ai_service(Dated, client=ChatClient.create(model)).ask("day?")
    today = datetime.datetime.now().astimezone().date().isoformat()
    assert model.last_prompt.system_message.text == f"Today is {today}."


def test_optional_none_value_reaches_the_template():
    class Notes(Protocol):
        @user("{{ text }}{% if note %} (note: {{ note }}){% endif %}")
        def ask(self, text: str, note: str | None = None) -> str: ...

    model = ScriptedChatModel(["a", "b"])
    svc = ai_service(Notes, client=ChatClient.create(model))
    svc.ask("hello")
    assert model.last_prompt.user_message.text == "hello"
    svc.ask("hello", note="urgent")
    assert model.last_prompt.user_message.text == "hello (note: urgent)"


def test_abc_interface_and_concrete_methods_are_kept():
    class Helper(ABC):
        @abstractmethod
        def answer(self, question: str) -> str: ...

        def shout(self, question: str) -> str:
            return self.answer(question).upper()

    class Proto(Protocol):
        def answer(self, question: str) -> str: ...

        def twice(self, question: str) -> str:
            return self.answer(question) + self.answer(question)

    model = ScriptedChatModel(["yes", "a", "b"])
    helper = ai_service(Helper, client=ChatClient.create(model))
    assert isinstance(helper, Helper)
    assert helper.shout("ok?") == "YES"
    proto = ai_service(Proto, client=ChatClient.create(model))
    assert proto.twice("x") == "ab"


def test_service_advisors_and_client_defaults_apply():
    log: list[str] = []
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_advisors(RecordingAdvisor("client", log)).build()
    svc = ai_service(Assistant, client=client, advisors=[RecordingAdvisor("service", log, order=10)])
    svc.ask("q")
    assert log == ["client:before", "service:before", "service:after", "client:after"]
    # building the service never changes the client it was given
    log.clear()
    model.add("plain")
    assert client.prompt("x").call().content() == "plain"
    assert log == ["client:before", "client:after"]


def test_service_repr_signature_and_doc():
    import inspect

    svc, _ = service()
    assert repr(svc) == "<ai_service Assistant>"
    assert list(inspect.signature(svc.ask).parameters) == ["question", "role", "lang"]
    assert svc.extract.__doc__.startswith("Extract the invoice")
    assert Assistant in type(svc).__mro__


# -- return types ----------------------------------------------------------------------------------


def test_entity_return_types():
    svc, _ = service("positive", '"spam"', "true", "42", '["a", "b"]')
    assert svc.classify("great!") is Sentiment.POSITIVE
    assert svc.label("buy now") == "spam"
    assert svc.is_question("why?") is True
    assert svc.count("1 2 3") == 42
    assert svc.tags("x") == ["a", "b"]


def test_entity_uses_the_same_structured_output_path_as_entity():
    svc, model = service('{"number": "A", "total": 1}')
    svc.extract("x")
    fluent_model = ScriptedChatModel(['{"number": "A", "total": 1}'])
    ChatClient.create(fluent_model).prompt(model.last_prompt.user_message.text.split("\n")[0]).call().entity(Invoice)
    # the format instructions appended by the terminal advisor are the ones entity() appends
    assert model.last_prompt.user_message.text == fluent_model.last_prompt.user_message.text


def test_entity_native_schema_when_the_model_supports_it():
    model = ScriptedChatModel(
        ['{"number": "N", "total": 2}'], capabilities=ModelCapabilities(native_structured_output=True)
    )
    svc = ai_service(Assistant, client=ChatClient.create(model))
    assert svc.extract("x") == Invoice(number="N", total=2)
    options = model.last_prompt.options
    assert options is not None and options.output_schema["properties"].keys() == {"number", "total"}


def test_validation_advisor_retries_inside_a_service():
    svc, model = service(
        '{"number": "A", "total": "lots"}',
        '{"number": "A", "total": 3}',
        advisors=[StructuredOutputValidationAdvisor(output_type=Invoice)],
    )
    assert svc.extract("x") == Invoice(number="A", total=3)
    assert len(model.prompts) == 2


def test_unparseable_entity_raises_output_conversion_error():
    svc, _ = service("not json at all")
    with pytest.raises(OutputConversionError):
        svc.extract("x")


def test_result_carries_value_usage_finish_reason_and_response():
    svc, _ = service('{"number": "R", "total": 5}', "plain words")
    result = svc.detailed("x")
    assert isinstance(result, Result)
    assert result.value == Invoice(number="R", total=5)
    assert result.finish_reason == "stop"
    assert result.usage.completion_tokens > 0
    assert result.response is not None and result.response.result.output.text == '{"number": "R", "total": 5}'
    assert result.sources == () and result.tool_executions == ()
    text_result = svc.detailed_text("y")
    assert text_result.value == "plain words" and text_result.finish_reason == "stop"


def test_chat_response_and_client_response_return_types():
    svc, _ = service("one", "two")
    assert svc.raw("x").result.output.text == "one"
    whole = svc.whole("y")
    assert isinstance(whole, ChatClientResponse) and whole.chat_response.result.output.text == "two"


def test_stream_text():
    svc, model = service(["Hel", "lo", "!"])
    it = svc.stream("hi")
    assert model.prompts == []  # nothing runs before iteration
    assert list(it) == ["Hel", "lo", "!"]


def test_astream_text():
    svc, _ = service(["a", "b"])

    async def run():
        return [t async for t in svc.astream("hi")]

    assert asyncio.run(run()) == ["a", "b"]


def test_stream_partial_entities():
    svc, _ = service(['{"number": "X', '-1", "to', 'tal": 4.5}'])
    states = list(svc.drafts("x"))
    assert states[-1] == Invoice(number="X-1", total=4.5)
    assert len(states) >= 2 and states[0].total is None


def test_astream_partial_entities():
    svc, _ = service(['{"number": "Y", ', '"total": 1}'])

    async def run():
        return [s async for s in svc.adrafts("x")]

    states = asyncio.run(run())
    assert states[-1] == Invoice(number="Y", total=1) and states[0].total is None


def test_async_entity_and_result():
    svc, _ = service('{"number": "A", "total": 1}', '{"number": "B", "total": 2}')

    async def run():
        return await svc.aextract("x"), await svc.adetailed("y")

    entity, result = asyncio.run(run())
    assert entity == Invoice(number="A", total=1)
    assert result.value == Invoice(number="B", total=2) and result.finish_reason == "stop"


def test_async_methods_are_coroutines_and_run_concurrently():
    import inspect

    svc, model = service(*[f"r{i}" for i in range(5)])
    assert inspect.iscoroutinefunction(type(svc).aask)

    async def run():
        return await asyncio.gather(*(svc.aask(f"q{i}") for i in range(5)))

    assert sorted(asyncio.run(run())) == [f"r{i}" for i in range(5)]
    assert len(model.prompts) == 5


# -- the same prompt in every mode -----------------------------------------------------------------


class FourModes(Protocol):
    @system("You are a {{ role }}.")
    @user("{{ question }} (asked on {{ current_date }})")
    def call(self, question: str, image: Media, role: str = "guide") -> str: ...

    @system("You are a {{ role }}.")
    @user("{{ question }} (asked on {{ current_date }})")
    async def acall(self, question: str, image: Media, role: str = "guide") -> str: ...

    @system("You are a {{ role }}.")
    @user("{{ question }} (asked on {{ current_date }})")
    def stream(self, question: str, image: Media, role: str = "guide") -> Iterator[str]: ...

    @system("You are a {{ role }}.")
    @user("{{ question }} (asked on {{ current_date }})")
    def astream(self, question: str, image: Media, role: str = "guide") -> AsyncIterator[str]: ...


def test_prompt_is_the_same_in_all_four_modes():
    model = ScriptedChatModel(["a", "b", ["c"], ["d"]])
    svc = ai_service(FourModes, client=ChatClient.create(model))
    image = Media("image/png", b"img")

    async def run_async():
        first = await svc.acall("{{ q }}?", image, role="{{ role }}")
        rest = [t async for t in svc.astream("{{ q }}?", image, role="{{ role }}")]
        return first, rest

    assert svc.call("{{ q }}?", image, role="{{ role }}") == "a"
    assert asyncio.run(run_async()) == ("b", ["c"])
    assert list(svc.stream("{{ q }}?", image, role="{{ role }}")) == ["d"]
    assert len(model.prompts) == 4
    first = model.prompts[0]
    for prompt in model.prompts[1:]:
        assert prompt.messages == first.messages
    assert first.system_message.text == "You are a {{ role }}."
    assert first.user_message.text.startswith("{{ q }}? (asked on 2")
    assert first.user_message.media == (image,)


def test_interface_inheritance():
    class Base(Protocol):
        def ask(self, question: str) -> str: ...

    class Extended(Base, Protocol):
        def shout(self, question: str) -> str:
            return self.ask(question).upper()

        def summarise(self, text: str) -> str: ...

    class Concrete(Base):  # a plain subclass of a Protocol: its inherited declarations still count
        def ask_twice(self, question: str) -> str:
            return self.ask(question) * 2

    model = ScriptedChatModel(["a", "b", "c"])
    ext = ai_service(Extended, client=ChatClient.create(model))
    assert ext.shout("x") == "A" and ext.summarise("y") == "b"
    assert ai_service(Concrete, client=ChatClient.create(model)).ask_twice("z") == "cc"


def test_system_provider_text_is_a_template_over_the_parameters():
    class Localised(Protocol):
        @user("{{ question }}")
        def ask(self, question: str, lang: str = "Italian") -> str: ...

    model = ScriptedChatModel(["Ciao", "Hola"])
    svc = ai_service(
        Localised, client=ChatClient.create(model), system_message_provider=lambda _id: "Answer in {{ lang }}."
    )
    svc.ask("hello")
    assert texts(model.last_prompt) == [("system", "Answer in Italian."), ("user", "hello")]
    svc.ask("hello", lang="Spanish")
    assert texts(model.last_prompt)[0] == ("system", "Answer in Spanish.")


def test_templates_rendering_to_nothing():
    class Optional(Protocol):
        @system("{% if strict %}Be strict.{% endif %}")
        @user("{% if text %}{{ text }}{% endif %}")
        def ask(self, text: str, strict: bool = False) -> str: ...

    model = ScriptedChatModel(["ok"])
    svc = ai_service(Optional, client=ChatClient.create(model))
    assert svc.ask("hi") == "ok"
    assert texts(model.last_prompt) == [("user", "hi")]  # no empty system message
    with pytest.raises(ValueError, match="rendered to empty text"):
        svc.ask("")

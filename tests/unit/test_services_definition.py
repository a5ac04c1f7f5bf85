"""ai_service: every bad declaration fails when the service is built, naming the method and parameter."""

from abc import ABC
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import pytest

from chatclient import ChatClient
from chatclient.errors import AiServiceDefinitionError, ChatClientError
from chatclient.memory import MessageWindowChatMemory
from chatclient.services import MemoryId, Result, ToolArg, V, ai_service, system, user
from chatclient.testing import ScriptedChatModel


def build(iface, **kwargs):
    model = ScriptedChatModel([])
    return ai_service(iface, client=ChatClient.create(model), **kwargs)


def definition_error(iface, match, **kwargs):
    with pytest.raises(AiServiceDefinitionError, match=match) as info:
        build(iface, **kwargs)
    assert isinstance(info.value, ChatClientError)
    return info.value


def test_unknown_template_variable_names_method_and_variable():
    class Bad(Protocol):
        @user("Answer {{ question }} in {{ langauge }}")
        def ask(self, question: str, language: str = "en") -> str: ...

    err = definition_error(Bad, r"Bad\.ask: the user template uses langauge")
    assert err.method == "ask" and err.parameter == "langauge"
    assert "language" in str(err)  # lists what is available


def test_unknown_variable_in_system_template_and_docstring():
    class BadSystem(Protocol):
        @system("You are {{ persona }}.")
        def ask(self, question: str) -> str: ...

    definition_error(BadSystem, "system template uses persona")

    class BadDoc(Protocol):
        def ask(self, question: str) -> str:
            """Answer {{ questoin }}."""

    definition_error(BadDoc, "user template uses questoin")


def test_template_syntax_error():
    class Broken(Protocol):
        @user("{{ question ")
        def ask(self, question: str) -> str: ...

    definition_error(Broken, r"Broken\.ask: the user template is not valid")


def test_unused_parameter():
    class Unused(Protocol):
        @user("{{ question }}")
        def ask(self, question: str, tone: str = "kind") -> str: ...

    err = definition_error(Unused, "parameter 'tone' is not used")
    assert err.parameter == "tone"


def test_two_memory_ids():
    class Two(Protocol):
        def ask(self, question: str, a: MemoryId[str] = "x", b: MemoryId[str] = "y") -> str: ...

    err = definition_error(Two, "two MemoryId parameters, 'a' and 'b'", memory=MessageWindowChatMemory())
    assert err.parameter == "b"


def test_memory_id_without_memory():
    class NeedsMemory(Protocol):
        def ask(self, question: str, user: MemoryId[str] = "default") -> str: ...

    definition_error(NeedsMemory, "'user' is a MemoryId but the service has no memory")


def test_var_args_are_rejected():
    class Star(Protocol):
        def ask(self, *questions: str) -> str: ...

    definition_error(Star, r"parameter 'questions' is \*questions")

    class Kw(Protocol):
        @user("hi")
        def ask(self, **extra: str) -> str: ...

    definition_error(Kw, "parameter 'extra'")


def test_ambiguous_user_message():
    class Ambiguous(Protocol):
        def ask(self, a: str, b: str) -> str: ...

    definition_error(Ambiguous, "cannot tell which of 'a', 'b' is the user message")


def test_no_user_message():
    class Nothing(Protocol):
        def ask(self) -> str: ...

    definition_error(Nothing, "there is no user message")


def test_non_str_parameter_cannot_be_the_user_message():
    class Number(Protocol):
        def ask(self, n: int) -> str: ...

    definition_error(Number, "'n' would be the user message but is not a str")


def test_duplicate_variable_names():
    class Dup(Protocol):
        @user("{{ q }}")
        def ask(self, q: str, other: V["q"]) -> str: ...  # noqa: F821

    definition_error(Dup, "two parameters give the template variable 'q'")


def test_conflicting_markers():
    class Both(Protocol):
        def ask(self, q: str, x: MemoryId[ToolArg[str]] = "a") -> str: ...

    definition_error(Both, "more than one of V, MemoryId and ToolArg", memory=MessageWindowChatMemory())


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (None, "returns None"),
        (Any, "not Any"),
        (list, "list needs an item type"),
        (Result, "Result needs a value type"),
        (Iterator, "a stream needs an item type"),
        (Iterator[int], "streams yield str"),
        (type(lambda: 0), "unsupported return type"),
    ],
)
def test_unsupported_return_types(annotation, message):
    def ask(self, question: str): ...

    ask.__annotations__["return"] = annotation
    iface = type("Bad", (Protocol,), {"ask": ask})
    err = definition_error(iface, message)
    assert err.method == "ask"


def test_async_def_with_async_iterator_is_rejected():
    class AsyncGen(Protocol):
        async def stream(self, question: str) -> AsyncIterator[str]: ...

    definition_error(AsyncGen, "declare it with plain `def")

    class AsyncSync(Protocol):
        async def stream(self, question: str) -> Iterator[str]: ...

    definition_error(AsyncSync, "cannot return a sync Iterator")


def test_unresolvable_annotation():
    class Forward(Protocol):
        def ask(self, question: "NoSuchType") -> str: ...  # noqa: F821

    definition_error(Forward, "cannot read its type hints")


def test_missing_prompt_file(tmp_path):
    class FromFile(Protocol):
        @system(from_file=tmp_path / "missing.txt")
        def ask(self, question: str) -> str: ...

    assert definition_error(FromFile, "cannot read the prompt file").method == "ask"

    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))

    class NotUtf8(Protocol):
        @system(from_file=tmp_path / "latin1.txt")
        def ask(self, question: str) -> str: ...

    definition_error(NotUtf8, "is not UTF-8 text")


def test_oversized_prompt_file(tmp_path, monkeypatch):
    from chatclient.services import markers

    path = tmp_path / "big.txt"
    path.write_text("x" * 200, encoding="utf-8")
    monkeypatch.setattr(markers, "MAX_TEMPLATE_FILE_BYTES", 100)

    class Big(Protocol):
        @system(from_file=path)
        def ask(self, question: str) -> str: ...

    err = definition_error(Big, "larger than 100 bytes")
    assert err.method == "ask"


def test_not_an_interface():
    class Plain:
        def ask(self, question: str) -> str:
            return ""

    definition_error(Plain, "neither a typing.Protocol nor an abstract class")
    with pytest.raises(TypeError, match="needs an interface class"):
        build("Assistant")


def test_no_methods():
    class Empty(Protocol):
        def helper(self) -> int:
            return 1

    definition_error(Empty, "declares no methods")


def test_abstract_property_cannot_be_implemented():
    import abc

    class WithProp(ABC):
        @property
        @abc.abstractmethod
        def name(self) -> str: ...

        @abc.abstractmethod
        def ask(self, question: str) -> str: ...

    definition_error(WithProp, "cannot be implemented")


def test_bad_arguments_to_ai_service():
    class Ok(Protocol):
        def ask(self, question: str) -> str: ...

    model = ScriptedChatModel([])
    with pytest.raises(TypeError, match=r"wrap the model: client=ChatClient.create\(ScriptedChatModel"):
        ai_service(Ok, client=model)
    with pytest.raises(ValueError, match="not both"):
        build(Ok, memory=MessageWindowChatMemory(), memory_provider=lambda i: MessageWindowChatMemory())
    with pytest.raises(TypeError, match="memory_provider must be a callable"):
        build(Ok, memory_provider="nope")
    with pytest.raises(TypeError, match="retriever must be"):
        build(Ok, retriever=object())
    with pytest.raises(TypeError, match="advisors"):
        build(Ok, advisors=[object()])
    with pytest.raises(TypeError):
        build(Ok, tools=[42])


def test_decorator_misuse():
    with pytest.raises(TypeError, match="exactly one"):
        system()
    with pytest.raises(TypeError, match="exactly one"):
        user("x", from_file="y")
    with pytest.raises(ValueError, match="cannot be empty"):
        system("   ")


def test_errors_arise_at_build_not_first_call():
    calls = []

    class Late(Protocol):
        def fine(self, question: str) -> str: ...

        @user("{{ nope }}")
        def broken(self, question: str) -> str: ...

    model = ScriptedChatModel([])
    model.call = lambda prompt: calls.append(prompt)  # would record any call
    with pytest.raises(AiServiceDefinitionError, match=r"Late\.broken"):
        ai_service(Late, client=ChatClient.create(model))
    assert calls == []


def test_abc_without_abstract_methods_has_nothing_to_implement():
    class Concrete(ABC):  # noqa: B024 - the point of the test
        def ask(self, question: str) -> str:
            return "mine"

    definition_error(Concrete, "declares no methods")

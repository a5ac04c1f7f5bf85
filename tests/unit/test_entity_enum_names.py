"""entity(Enum) accepts a bare member name, as users and small models answer (issue 41.4), for every
model; and on the embedded model an Enum answer is grammar-constrained in every structured-output
mode (the instructions rung included)."""

from __future__ import annotations

import enum

import pytest

from chatclient import ChatClient
from chatclient.converters.core import EntityOutputConverter, enum_member
from chatclient.errors import OutputConversionError
from chatclient.messages import UserMessage
from chatclient.models.llamacpp import LlamaCppChatModel, is_choice_schema
from chatclient.models.structured_output import INSTRUCTIONS, prompt_for_rung
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel


class Category(enum.Enum):
    LEGAL = "legal"
    MEDICAL = "medical"
    TECHNICAL = "technical"


class Numbered(enum.Enum):
    ONE = 1
    TWO = 2


class Crossed(enum.Enum):  # a name that is another member's value: the value wins, as in JSON
    A = "B"
    B = "A"


@pytest.mark.parametrize(
    ("answer", "member"),
    [
        ("LEGAL", Category.LEGAL),
        ("  legal\n", Category.LEGAL),
        ('"LEGAL"', Category.LEGAL),
        ('"legal"', Category.LEGAL),
        ("Medical.", Category.MEDICAL),
        ("`technical`", Category.TECHNICAL),
        ("'Technical'", Category.TECHNICAL),
    ],
)
def test_a_bare_member_name_or_value_in_any_case_converts(answer: str, member: Category) -> None:
    assert EntityOutputConverter(Category).convert(answer) is member


def test_values_win_over_names_and_numbers_still_work() -> None:
    assert EntityOutputConverter(Crossed).convert("A") is Crossed.B
    assert EntityOutputConverter(Crossed).convert('"A"') is Crossed.B
    assert EntityOutputConverter(Numbered).convert("two") is Numbered.TWO
    assert EntityOutputConverter(Numbered).convert("2") is Numbered.TWO


def test_an_answer_naming_no_member_is_still_an_error() -> None:
    for answer in ("other", "legal and medical", "x" * 500, '"LEGALX"'):
        with pytest.raises(OutputConversionError):
            EntityOutputConverter(Category).convert(answer)
    assert enum_member(str, "LEGAL") is None


def test_entity_enum_through_a_client_accepts_the_bare_name_for_any_model() -> None:
    client = ChatClient.create(ScriptedChatModel(["LEGAL"]))
    assert client.prompt("Which category? I want to sue my neighbour.").call().entity(Category) is Category.LEGAL


def test_the_embedded_model_constrains_a_choice_in_every_rung() -> None:
    schema = EntityOutputConverter(Category).json_schema
    assert schema is not None and is_choice_schema(schema)
    assert not is_choice_schema({"type": "object", "properties": {}})
    hook = LlamaCppChatModel.structured_output_options
    for rung in ("native", "json_object", "instructions"):
        options = hook(None, rung, schema)  # type: ignore[arg-type]  # self is not used
        assert options is not None and options.output_schema == schema
    assert hook(None, "instructions", {"type": "object"}) is None  # type: ignore[arg-type]
    assert hook(None, "tool", schema) is None  # type: ignore[arg-type]  # its tool grammar constrains it


def test_the_instructions_rung_takes_a_models_options_along_with_the_instructions() -> None:
    class Constraining:
        def structured_output_options(self, rung: str, schema: dict[str, object]) -> ChatOptions | None:
            return ChatOptions(output_schema=schema) if rung == INSTRUCTIONS else None

    schema = {"enum": ["legal", "medical"], "type": "string"}
    prompt = Prompt([UserMessage("Which?")])
    shaped = prompt_for_rung(Constraining(), prompt, INSTRUCTIONS, schema, "FORMAT")
    assert shaped.options is not None and shaped.options.output_schema == schema
    assert shaped.user_message.text.endswith("FORMAT")
    plain = prompt_for_rung(object(), prompt, INSTRUCTIONS, schema, "FORMAT")
    assert (plain.options is None or plain.options.output_schema is None) and plain.user_message.text.endswith("FORMAT")

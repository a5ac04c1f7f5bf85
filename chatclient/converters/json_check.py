"""Check a model's JSON answer against a target type and say, in one line, what to fix.

This is the logic that ``advisors.StructuredOutputValidationAdvisor`` (which re-asks with the
problems appended to the user message) and ``chatclient.guardrails.JsonExtractionGuardrail``
(which reprompts with them) share::

    check = JsonOutputCheck(Person)
    problems = check.problems('{"name": 3}')      # ["at $.name: 3 is not of type 'string'", ...]
    line = check.feedback(problems)               # "Your previous answer was rejected because ..."

Each answer is cleaned like the converters clean it (whitespace, leading ``<think>`` blocks, a code
fence, a remark after the value), then checked twice: with ``jsonschema`` against the target's
schema (the shape the model was asked for), then with pydantic (so field validators count too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatclient import jsonsafe

if TYPE_CHECKING:
    from chatclient.converters.core import EntityOutputConverter

FEEDBACK_PREFIX = "Your previous answer was rejected because its JSON did not match the required format: "
MAX_LISTED_PROBLEMS = 10
"""Problems listed in a feedback line; more are summarised as a count."""
_MAX_MESSAGE = 200  # characters kept of each problem's message


class JsonOutputCheck:
    """Validates JSON answers against ``output_type`` (anything ``entity()`` accepts with a schema).

    ``output_type`` may also be an ``EntityOutputConverter``; a converter given explicitly must
    have a JSON schema (``ValueError`` otherwise). Types without a schema of their own (``dict``)
    are checked as JSON objects.
    """

    def __init__(self, output_type: Any) -> None:
        if output_type is None:
            raise ValueError("output_type must be set")
        from chatclient.converters.core import EntityOutputConverter, converter_for

        converter = converter_for(output_type)
        if not isinstance(converter, EntityOutputConverter) or converter.json_schema is None:
            if converter is output_type:  # a converter given explicitly must bring its own schema
                raise ValueError(f"the converter {output_type!r} has no JSON schema to validate against")
            converter = EntityOutputConverter(output_type)  # e.g. dict: validate as a JSON object
        self.output_type = output_type
        self.converter: EntityOutputConverter[Any] = converter
        self._validator: Any = None  # jsonschema validator, built on first use (keeps imports lazy)

    def __getstate__(self) -> dict[str, Any]:
        # A built jsonschema validator holds local functions: it is built again where the check arrives.
        return {**self.__dict__, "_validator": None}

    def problems(self, text: str | None) -> list[str]:
        """Every problem of ``text`` as ``"at <path>: <message>"``; empty when it is valid."""
        from chatclient.converters.cleaning import clean_text, first_json_value

        if text is None or not text.strip():
            return ["at $: the answer has no JSON (it is empty)"]
        cleaned = clean_text(text)
        segment = first_json_value(cleaned)
        if segment is None:
            return [f"at $: the answer is not valid JSON ({_json_problem(cleaned)}); answer with the JSON value only"]
        try:
            instance = jsonsafe.loads(segment)
        except jsonsafe.JSONDepthError as exc:
            return [f"at $: the answer is not usable JSON ({exc})"]
        try:
            errors = [
                f"at {_json_path(e.absolute_path)}: {_short(e.message)}"
                for e in sorted(self._schema_validator().iter_errors(instance), key=_error_sort_key)
            ]
        except RecursionError:  # jsonschema recurses per level of a recursive schema ($ref to itself)
            return ["at $: the answer nests too deeply to validate; answer with a flatter JSON value"]
        if errors:
            return errors
        from pydantic import ValidationError

        try:
            self.converter.type_adapter.validate_json(segment)
        except ValidationError as exc:
            return [f"at {_json_path(e['loc'])}: {_short(e['msg'])}" for e in exc.errors(include_url=False)]
        return []

    def json_text(self, text: str) -> str | None:
        """The JSON value in ``text`` once cleaned (fences, ``<think>`` blocks removed), or None."""
        from chatclient.converters.cleaning import clean_text, first_json_value

        return first_json_value(clean_text(text))

    def feedback(self, problems: Sequence[str]) -> str:
        """One line telling the model what was wrong (at most ``MAX_LISTED_PROBLEMS`` listed)."""
        shown = list(problems[:MAX_LISTED_PROBLEMS])
        if len(problems) > MAX_LISTED_PROBLEMS:
            shown.append(f"and {len(problems) - MAX_LISTED_PROBLEMS} more")
        return FEEDBACK_PREFIX + "; ".join(shown) + "."

    def _schema_validator(self) -> Any:
        if self._validator is None:
            from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # no stubs in deps

            self._validator = Draft202012Validator(self.converter.json_schema)
        return self._validator


def _json_path(loc: Any) -> str:
    from chatclient.converters.core import json_path

    return json_path(loc)


def _short(message: str) -> str:
    one_line = " ".join(message.split())
    return one_line if len(one_line) <= _MAX_MESSAGE else one_line[: _MAX_MESSAGE - 3] + "..."


def _error_sort_key(error: Any) -> tuple[str, str]:
    return (_json_path(error.absolute_path), error.message)


def _json_problem(text: str) -> str:
    try:
        jsonsafe.loads(text)
    except jsonsafe.JSONDepthError:
        return "it nests too deeply"
    except json.JSONDecodeError as exc:
        return exc.msg
    return "unexpected text"


__all__ = ["FEEDBACK_PREFIX", "MAX_LISTED_PROBLEMS", "JsonOutputCheck"]

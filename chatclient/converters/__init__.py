"""Structured output: converters (text -> typed value), their JSON schemas, text cleaning and
partial entities for streams.

    from chatclient.converters import EntityOutputConverter, converter_for
    person = EntityOutputConverter(Person).convert('{"name": "Ada", "age": 36}')

Imported lazily by the client (only ``entity()``/``response_entity()`` need it), so
``import chatclient`` does not pay for pydantic's schema machinery.
"""

from chatclient.converters.cleaning import clean_text, first_json_value, strip_code_fence, strip_thinking
from chatclient.converters.core import (
    EntityOutputConverter,
    ListOutputConverter,
    MapOutputConverter,
    StructuredOutputConverter,
    conversion_error,
    converter_for,
    describe_validation_error,
    json_path,
    type_name,
)
from chatclient.converters.partial import astream_entities, build_partial, parse_partial_json, stream_entities
from chatclient.converters.schema import DRAFT_2020_12, strict_schema

__all__ = [
    "DRAFT_2020_12",
    "EntityOutputConverter",
    "ListOutputConverter",
    "MapOutputConverter",
    "StructuredOutputConverter",
    "astream_entities",
    "build_partial",
    "clean_text",
    "conversion_error",
    "converter_for",
    "describe_validation_error",
    "first_json_value",
    "json_path",
    "parse_partial_json",
    "stream_entities",
    "strict_schema",
    "strip_code_fence",
    "strip_thinking",
    "type_name",
]

"""Entity extraction: typed answers with ``entity(T)``, lists of entities, and validation retries.

    python examples/entity_extraction.py

Runs offline on ``ScriptedChatModel``: its scripted JSON answers stand in for a model's, including
one invalid answer (``"age": "thirty-one"``) that ``StructuredOutputValidationAdvisor`` rejects and
re-asks. Set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to extract with a real model.
"""

from __future__ import annotations

import enum

from _support import make_model
from pydantic import BaseModel, Field

from advisors import StructuredOutputValidationAdvisor
from chatclient import ChatClient
from chatclient.testing import ScriptedChatModel


class Sentiment(enum.Enum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, description="Age in years")
    city: str


TEXT = "Maria Silva (31) lives in Lisbon; her brother João, 27, moved to Porto last year."

SCRIPT = [
    '{"name": "Maria Silva", "age": 31, "city": "Lisbon"}',
    '```json\n[{"name": "Maria Silva", "age": 31, "city": "Lisbon"}, {"name": "João", "age": 27, "city": "Porto"}]\n```',
    "positive",
    '{"name": "Maria Silva", "age": "thirty-one", "city": "Lisbon"}',
    '{"name": "Maria Silva", "age": 31, "city": "Lisbon"}',
]


def main() -> None:
    model = make_model(ScriptedChatModel(SCRIPT))
    client = ChatClient.create(model)

    # 1. One entity: the format instructions (JSON only + the schema) are added to the prompt.
    person = client.prompt(f"Who is the first person in this text? {TEXT}").call().entity(Person)
    print("person:", person)

    # 2. A list of entities; code fences around the JSON are cleaned off before parsing.
    people = client.prompt(f"List every person in this text: {TEXT}").call().entity(list[Person])
    print("people:", people)

    # 3. Enums and other scalars work too.
    mood = client.prompt("Sentiment of: 'What a wonderful day!'").call().entity(Sentiment)
    print("sentiment:", mood)

    # 4. Validation: an answer that does not match the schema is re-asked with the problems listed.
    entity = (
        client.prompt(f"Who is the first person in this text? {TEXT}")
        .advisors(StructuredOutputValidationAdvisor(Person, max_repeat_attempts=2))
        .call()
        .response_entity(Person)
    )
    attempts = entity.response.metadata.extra.get("validation_attempts") if entity.response else None
    print(f"validated: {entity.entity} after {attempts} model calls")
    if isinstance(model, ScriptedChatModel):
        lines = model.last_prompt.user_message.text.splitlines()
        print("feedback sent on the retry:", next(line for line in lines if "rejected" in line))


if __name__ == "__main__":
    main()

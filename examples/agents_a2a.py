"""Agents over A2A: a translation team served as an A2A server, called from another workflow.

``serve_a2a`` exposes a workflow (a translator model agent, then a function agent that signs the
translation) over HTTP with an agent card; ``a2a_agent`` turns that remote agent back into a local
agent, used here inside a local ``sequence``, streamed, continued in the same remote conversation,
and stopped by a remote question that a person answers (``resume``).

Needs the a2a extra: pip install 'chatclient[a2a]'.
Run: .venv/bin/python examples/agents_a2a.py   (offline by default; see examples/_support.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import make_model

from chatclient import ChatClient, Prompt
from chatclient.a2a import a2a_agent, serve_a2a
from chatclient.agents import agent, agent_function, human_input, sequence
from chatclient.events import TextDelta
from chatclient.testing import FunctionChatModel

FRENCH = {"The otters are asleep.": "Les loutres dorment.", "They hold hands.": "Elles se tiennent la main."}


def offline_answer(prompt: Prompt) -> str:
    """Deterministic answers for the offline run: what a good model would say."""
    sentence = prompt.user_message.text.split(": ", 1)[1]
    return FRENCH.get(sentence, sentence)


@agent_function(output_key="signed", description="Signs a translation.")
def sign(french: str, turns: int = 0) -> str:
    return f"{french} (translation {turns + 1})"


@agent_function(output_key="turns")
def count(turns: int = 0) -> int:
    return turns + 1


@agent_function(output_key="request")
def pick(topic: str) -> str:
    return "The otters are asleep." if topic == "otters" else "They hold hands."


@agent_function(output_key="booking")
def book(city: str) -> str:
    return f"booked a translator in {city}"


def main() -> None:
    client = ChatClient.create(make_model(FunctionChatModel(offline_answer)))
    translator = agent(client, name="translator", user="Translate into French: {{ request }}", output_key="french")
    team = sequence(
        translator,
        sign,
        count,
        name="french_team",
        description="Translates English sentences into French",
        output=lambda scope: scope.read("signed"),
    )
    booker = sequence(human_input(question="In which city?", output_key="city"), book, name="booker")

    with serve_a2a(team) as server, serve_a2a(booker) as booking_server:
        print("card:", server.card.name, "-", server.card.description)
        print("skills:", [skill.id for skill in server.card.skills])

        remote = a2a_agent(server.url, output_key="french_text")
        local = sequence(pick, remote, name="local")
        first = local.run(topic="otters")
        print("remote answer:", first.output)

        # The same remote conversation goes on when its context id is passed back.
        context_id = first.scope.read("french_team_context_id")
        again = local.run(topic="hands", french_team_context_id=context_id)
        print("same conversation:", again.output)

        deltas = [e.text for e in remote.stream(request="They hold hands.") if isinstance(e, TextDelta)]
        print("streamed:", "".join(deltas))

        waiting = a2a_agent(booking_server.url).run(request="book a translator")
        print("remote question:", waiting.suspended.question if waiting.suspended else None)
        done = a2a_agent(booking_server.url).resume(waiting.scope.to_json(), "Lyon")
        print("after the answer:", done.output)


if __name__ == "__main__":
    main()

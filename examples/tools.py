"""Tools: the model calls Python functions; the client runs the tool loop until it answers.

    python examples/tools.py

Shows a ``@tool`` with a ``ToolContext`` (application values the model never sees), two tool calls
in one turn (run concurrently), the exchange recorded in the response context, and a
``return_direct`` tool whose result is the answer. Runs offline on ``ScriptedChatModel``, whose
script plays the model's tool calls; the tools themselves really run. Set ``OPENAI_API_KEY`` or
``CHATCLIENT_BASE_URL`` to let a real model decide which tools to call.
"""

from __future__ import annotations

from typing import Annotated

from _support import make_model
from pydantic import BaseModel, Field

from chatclient import AssistantMessage, ChatClient, ContextKeys, ToolCall, ToolResponseMessage
from chatclient.testing import ScriptedChatModel, ScriptEntry
from chatclient.tools import ToolContext, tool


class Weather(BaseModel):
    city: str
    temp_c: float
    conditions: str


FORECASTS = {"lisbon": (21.0, "sunny"), "oslo": (4.5, "light snow")}


@tool
def get_weather(city: Annotated[str, Field(description="City name, e.g. Lisbon")], ctx: ToolContext) -> Weather:
    """Current weather of a city."""
    temp, conditions = FORECASTS.get(city.lower(), (15.0, "cloudy"))
    print(f"  [tool] get_weather({city!r}) for tenant {ctx['tenant']}")
    return Weather(city=city, temp_c=temp, conditions=conditions)


@tool(return_direct=True)
def open_ticket(summary: str) -> str:
    """Open a support ticket and return its number; the number is the final answer."""
    print(f"  [tool] open_ticket({summary!r})")
    return "Ticket #4711 opened."


SCRIPT: list[ScriptEntry] = [
    AssistantMessage(
        None,
        tool_calls=(
            ToolCall("call_1", "get_weather", '{"city": "Lisbon"}'),
            ToolCall("call_2", "get_weather", '{"city": "Oslo"}'),
        ),
    ),
    "Lisbon is sunny at 21 °C, while Oslo has light snow at 4.5 °C: Lisbon is warmer.",
    AssistantMessage(None, tool_calls=(ToolCall("call_3", "open_ticket", '{"summary": "Printer on fire"}'),)),
]


def main() -> None:
    client = ChatClient.builder(make_model(ScriptedChatModel(SCRIPT))).default_tools(get_weather).build()

    response = (
        client.prompt("Which is warmer right now, Lisbon or Oslo?")
        .tool_context({"tenant": "acme"})
        .call()
        .chat_client_response()
    )
    print("answer:", response.chat_response.text if response.chat_response else None)
    for message in response.context.get(ContextKeys.TOOL_EXCHANGE, ()):
        if isinstance(message, ToolResponseMessage):
            print("  tool responses:", [r.response_data for r in message.responses])
        elif isinstance(message, AssistantMessage):
            print("  tool calls:", [f"{c.name}({c.arguments})" for c in message.tool_calls])

    # return_direct: the tool's result is the answer; the model is not called a second time.
    direct = client.prompt("The printer is on fire, open a ticket.").tools(open_ticket).call().chat_response()
    assert direct is not None and direct.result is not None
    print("direct answer:", direct.text, f"(finish reason {direct.result.metadata.finish_reason})")


if __name__ == "__main__":
    main()

"""The fluent API: a client with defaults, templates, one call, and what comes back.

    python examples/fluent_call.py

Runs offline on ``ScriptedChatModel`` (the answers below are scripted); set ``OPENAI_API_KEY`` or
``CHATCLIENT_BASE_URL`` to send the same requests to a real model (see ``examples/_support.py``).
"""

from __future__ import annotations

from _support import make_model

from chatclient import ChatClient, ChatOptions
from chatclient.testing import ScriptedChatModel

SCRIPT = [
    "Recursion is when a function solves a problem by calling itself on a smaller piece of it.",
    "Arr, recursion be a function that calls itself, like a parrot repeatin' its own words!",
]


def main() -> None:
    model = make_model(ScriptedChatModel(SCRIPT))

    # A client holds defaults; build it once and reuse it (it is immutable and thread-safe).
    client = (
        ChatClient.builder(model)
        .default_system("You are {{ persona }}. Answer in one sentence.", params={"persona": "a patient teacher"})
        .default_options(ChatOptions(temperature=0.2, max_tokens=80))
        .build()
    )

    # One request: text with params is a jinja2 template; without params it is sent as is.
    spec = client.prompt().user("Explain {{ topic }} to a beginner.", params={"topic": "recursion"})
    response = spec.call()
    print("answer:", response.content())

    # The same response spec also gives the full response (the model is not called again).
    chat_response = response.chat_response()
    assert chat_response is not None
    usage = chat_response.metadata.usage
    print("finish reason:", chat_response.result.metadata.finish_reason if chat_response.result else None)
    print(f"usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens")

    # mutate() copies the defaults into a new builder: the original client is unchanged.
    pirate = client.mutate().default_system("You are a pirate. Answer in one sentence.").build()
    print("pirate:", pirate.prompt("Explain recursion.").call().content())

    # What was actually sent the first time: system message rendered from its template.
    if isinstance(model, ScriptedChatModel):
        first = model.prompts[0]
        print("sent system:", first.system_message.text)
        print("sent user:", first.user_message.text)


if __name__ == "__main__":
    main()

"""Default advisors per client: registered once, combined with each request's own, sorted by order.

    python examples/default_advisors.py

A support client gets a safeguard and an order log by default; one request adds re-reading (Re2),
another derives a second client with ``mutate()``. Default context params (here a conversation id)
are merged with the request's. Runs offline on ``ScriptedChatModel``; set ``OPENAI_API_KEY`` or
``CHATCLIENT_BASE_URL`` for a real model.
"""

from __future__ import annotations

from _support import make_model

from advisors import ReReadingAdvisor, SafeGuardAdvisor
from chatclient import ChatClient, ContextKeys
from chatclient.testing import RecordingAdvisor, ScriptedChatModel

SCRIPT = [
    "You can reset it from the login page under 'Forgot password'.",
    "Three r's.",
    "Our support line is open on weekdays from 9 to 5.",
]


def main() -> None:
    model = make_model(ScriptedChatModel(SCRIPT))
    log: list[str] = []
    support = (
        ChatClient.builder(model)
        .default_system("You are ACME's support assistant.")
        .default_advisors(
            RecordingAdvisor("outer-log", log, order=-10),
            SafeGuardAdvisor(["credit card number"]),
            params={ContextKeys.CONVERSATION_ID: "anonymous"},
        )
        .build()
    )

    # 1. Only the defaults run.
    print("1:", support.prompt("How do I reset my account?").call().content())

    log.clear()

    # 2. The request adds its own advisors: they append to the defaults and everything is sorted
    #    by order (equal orders keep registration order, defaults first).
    response = (
        support.prompt("How many r's are in 'strawberry'?")
        .advisors(ReReadingAdvisor(), RecordingAdvisor("inner-log", log, order=10))
        .advisors(params={ContextKeys.CONVERSATION_ID: "ada"})
        .call()
        .chat_client_response()
    )
    print("2:", response.chat_response.text if response.chat_response else None)
    print("   advisor order:", log)
    print("   conversation id in the context:", response.context[ContextKeys.CONVERSATION_ID])
    if isinstance(model, ScriptedChatModel):
        print("   re-read prompt sent:", model.last_prompt.user_message.text.replace("\n", " | "))

    # 3. The safeguard (a default) refuses without calling the model.
    print("3:", support.prompt("Please store my credit card number 4111...").call().content())

    # 4. mutate() copies the defaults into a new builder; the original client is unchanged.
    weekend = support.mutate().default_system("You are ACME's weekend support assistant.").build()
    print("4:", weekend.prompt("When are you open?").call().content())
    if isinstance(model, ScriptedChatModel):
        print("   system sent:", model.last_prompt.system_message.text, "| script left:", model.remaining)


if __name__ == "__main__":
    main()

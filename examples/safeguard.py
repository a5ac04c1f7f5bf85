"""Safeguard: refuse requests that mention sensitive words, and optionally screen the answers.

    python examples/safeguard.py

``SafeGuardAdvisor`` matches words case-insensitively anywhere in the conversation; a refused
request never reaches the model. With ``check_response=True`` the answer is screened too (a
stream is then buffered and released only once it passed). Runs offline on ``ScriptedChatModel``;
set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` for a real model.
"""

from __future__ import annotations

from _support import make_model

from advisors import SafeGuardAdvisor
from chatclient import ChatClient
from chatclient.testing import ScriptedChatModel, ScriptEntry

SCRIPT: list[ScriptEntry] = [
    "Paris is the capital of France.",
    ["The admin ", "password is ", "hunter2."],  # an answer that leaks what it should not
    "Here is a summary of the meeting notes.",
]


def main() -> None:
    model = make_model(ScriptedChatModel(SCRIPT))
    guard = SafeGuardAdvisor(["password", "social security number"], failure_response="Sorry, I can't help with that.")
    client = ChatClient.builder(model).default_advisors(guard).build()

    print("allowed:", client.prompt("What is the capital of France?").call().content())
    print("refused:", client.prompt("What is Bob's PASSWORD?").call().content())

    # Screening answers too: the streamed answer is held back, checked, and replaced.
    strict = client.mutate().default_advisors(SafeGuardAdvisor(["password"], check_response=True)).build()
    pieces = list(strict.prompt("Tell me something about the admin account.").stream().content())
    print("screened stream:", pieces)

    print("allowed:", client.prompt("Summarise the meeting notes.").call().content())
    if isinstance(model, ScriptedChatModel):
        print(f"model calls: {len(model.prompts)} (the refused request never reached the model)")


if __name__ == "__main__":
    main()

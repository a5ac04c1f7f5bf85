"""Chat memory in SQLite: conversations per user that survive a restart.

    python examples/memory_sqlite.py [path/to/chat.db]

``MessageChatMemoryAdvisor`` replays each conversation into the prompt; ``MessageWindowChatMemory``
keeps the last 20 messages; ``SqliteChatMemoryRepository`` stores them in one file (a temporary one
unless a path is given). Runs offline on ``FunctionChatModel`` with a tiny rule-based "model" that can
only know your name if the history it receives contains it, so the output shows memory at work. Set
``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to talk to a real model.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from _support import make_model

from advisors import MessageChatMemoryAdvisor
from chatclient import ChatClient, ContextKeys, Prompt, UserMessage
from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from chatclient.models import ChatModel
from chatclient.testing import FunctionChatModel


def rule_based_answer(prompt: Prompt) -> str:
    """Answers "what is my name" from the user messages it was sent, and nothing else."""
    question = prompt.user_message.text
    if "what is my name" in question.lower():
        for message in prompt.messages:
            found = re.search(r"my name is (\w+)", message.text or "", re.IGNORECASE)
            if isinstance(message, UserMessage) and found:
                return f"Your name is {found.group(1)}."
        return "I don't know your name yet."
    return "Nice to meet you!"


def client_for(model: ChatModel, db: Path) -> tuple[ChatClient, SqliteChatMemoryRepository]:
    repository = SqliteChatMemoryRepository(db)
    memory = MessageWindowChatMemory(repository, max_messages=20)
    client = (
        ChatClient.builder(model)
        .default_system("You are a friendly assistant.")
        .default_advisors(MessageChatMemoryAdvisor(memory))
        .build()
    )
    return client, repository


def ask(client: ChatClient, user: str, text: str) -> None:
    answer = client.prompt(text).advisors(params={ContextKeys.CONVERSATION_ID: user}).call().content()
    print(f"{user:>4} > {text}\n     < {answer}")


def main() -> None:
    model = make_model(FunctionChatModel(rule_based_answer))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "chat.db"

        client, repository = client_for(model, db)
        ask(client, "ada", "Hi, my name is Ada.")
        ask(client, "ada", "What is my name?")
        ask(client, "bob", "What is my name?")  # another conversation: Ada's history is not his
        repository.close()

        print("-- restart: a new repository and client on the same file --")
        client, repository = client_for(model, db)
        ask(client, "ada", "What is my name?")
        stored = repository.find("ada")
        print(f"stored for ada: {len(stored)} messages; conversations: {sorted(repository.find_conversation_ids())}")
        repository.close()


if __name__ == "__main__":
    main()

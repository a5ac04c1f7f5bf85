"""A script run in a child process by the run_many durability and Ctrl-C tests.

    python -m tests.support.run_many_child CALLS CHECKPOINT HANG_AT [HANG_SECONDS]

It runs ``run_many`` over the items 0..7 with a chat model that appends every call's item to the
file CALLS, one at a time (``concurrency=1``). The call for item HANG_AT (-1: none) writes its line
and then blocks, so the test can kill or interrupt the process while that item is in flight and the
items before it have finished.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chatclient import ChatClient
from chatclient.batch import run_many
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel


def main() -> None:
    calls, checkpoint, hang_at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    hang_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 600.0

    def answer(prompt: Prompt) -> str:
        item = prompt.user_message.text
        with calls.open("a") as out:  # the "money": one line per model call
            out.write(item + "\n")
        if item == str(hang_at):
            time.sleep(hang_seconds)
        return f"answer {item}"

    client = ChatClient.builder(FunctionChatModel(answer)).build()

    def ask(item: int) -> str | None:
        return client.prompt(str(item)).call().content()

    results = run_many(ask, range(8), concurrency=1, progress=True, checkpoint=checkpoint)
    print("values:", [r.value for r in results])


if __name__ == "__main__":
    main()

"""A client factory for the evaluation CLI's Ctrl-C test: ``--client tests.support.eval_slow_client:make``.

Each model call appends its input to the file named by ``EVAL_CALLS``; the input ``slow`` blocks
(for ``EVAL_HANG`` seconds), so the test can interrupt the run while that case is in flight.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from chatclient import ChatClient
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel


def make() -> ChatClient:
    calls = Path(os.environ["EVAL_CALLS"])

    def answer(prompt: Prompt) -> str:
        text = prompt.user_message.text
        with calls.open("a") as out:
            out.write(text + "\n")
        if text == "slow":
            time.sleep(float(os.environ.get("EVAL_HANG", "600")))
        return text.upper()

    return ChatClient.builder(FunctionChatModel(answer)).build()

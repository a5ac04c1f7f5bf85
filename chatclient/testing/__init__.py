"""Test doubles for code that uses chatclient: scripted and function-backed chat models, a
recording advisor, ``Cassette`` (record/replay of real HTTP exchanges, in ``chatclient.testing.cassette``)
and a pytest plugin (``chatclient.testing.pytest_plugin``).

model = ScriptedChatModel(["Hello!", ["Str", "eam", "ed"], ValueError("boom")])
client = ChatClient.create(model)
assert client.prompt("hi").call().content() == "Hello!"
assert model.prompts[0].user_message.text == "hi"
"""

from __future__ import annotations

from typing import Any

from chatclient.testing.doubles import (
    FunctionChatModel,
    RecordingAdvisor,
    ScriptedChatModel,
    ScriptEntry,
    ScriptExhaustedError,
    response_for,
)

# Record/replay pulls in httpx, so it loads on first access only.
_LAZY = {"Cassette": "chatclient.testing.cassette"}


def __getattr__(name: str) -> Any:
    from chatclient._lazy import lazy_getattr

    return lazy_getattr("chatclient.testing", _LAZY, globals())(name)


__all__ = [
    "Cassette",
    "FunctionChatModel",
    "RecordingAdvisor",
    "ScriptEntry",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "response_for",
]

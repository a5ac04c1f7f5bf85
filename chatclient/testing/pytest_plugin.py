"""A pytest plugin for code built on chatclient (registered under the ``pytest11`` entry point).

Fixtures:

* ``scripted_model`` — an empty ``ScriptedChatModel``; ``scripted_model.add("answer", ...)``.
* ``advisor_log`` — a list that recording advisors write to; ``recording_advisor(name, order=0)``
  makes a ``RecordingAdvisor`` writing to it.
* ``chat_assert`` — the assertions of ``chatclient.testing.assertions`` in one object:
  ``chat_assert.advisor_order(advisor_log, [...])``, ``chat_assert.prompt(model, contains=...)``,
  ``chat_assert.tool_calls(response, [...])``.
* ``cassette`` — a ``Cassette`` opened for the test: the file is named by
  ``@pytest.mark.cassette("name.json")`` (relative to a ``cassettes/`` folder next to the test
  file) or defaults to ``cassettes/<test name>.json``; the mode is ``replay`` unless
  ``--cassette-mode=record|new_episodes`` is given.

Without the entry point (running from a source checkout), enable it with
``-p chatclient.testing.pytest_plugin``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from chatclient.testing import assertions as _assertions

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds ``--cassette-mode``."""
    group = parser.getgroup("chatclient")
    group.addoption(
        "--cassette-mode",
        action="store",
        default="replay",
        choices=("replay", "record", "new_episodes"),
        help="how the chatclient `cassette` fixture treats recordings (default: replay)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Registers the ``cassette`` marker."""
    config.addinivalue_line(
        "markers", "cassette(path): the chatclient cassette file for this test (relative to the cassettes/ folder)"
    )


@pytest.fixture
def scripted_model() -> ScriptedChatModel:
    """An empty ``ScriptedChatModel``: add answers with ``scripted_model.add(...)``."""
    return ScriptedChatModel()


@pytest.fixture
def advisor_log() -> list[str]:
    """The shared log that ``recording_advisor`` advisors append ``name:before`` / ``name:after`` to."""
    return []


@pytest.fixture
def recording_advisor(advisor_log: list[str]) -> Callable[..., RecordingAdvisor]:
    """A factory ``recording_advisor(name, order=0)`` of advisors that record into ``advisor_log``."""

    def make(name: str, order: int = 0) -> RecordingAdvisor:
        return RecordingAdvisor(name, advisor_log, order)

    return make


class ChatAssertions:
    """The chatclient assertions, reachable from one fixture."""

    advisor_order = staticmethod(_assertions.assert_advisor_order)
    prompt = staticmethod(_assertions.assert_prompt)
    tool_calls = staticmethod(_assertions.assert_tool_calls)


@pytest.fixture
def chat_assert() -> ChatAssertions:
    """``chat_assert.advisor_order(...)``, ``.prompt(...)``, ``.tool_calls(...)``."""
    return ChatAssertions()


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ``Cassette`` for this test (see the module docs for the file name and the mode)."""
    from chatclient.testing.cassette import Cassette

    marker = request.node.get_closest_marker("cassette")
    folder = Path(str(request.node.path)).parent / "cassettes"
    if marker is not None and marker.args:
        path = Path(str(marker.args[0]))
        path = path if path.is_absolute() else folder / path
    else:
        path = folder / (_SAFE_NAME.sub("_", request.node.name) + ".json")
    mode = request.config.getoption("--cassette-mode", default="replay")
    with Cassette(path, mode=mode) as opened:
        yield opened


__all__ = ["ChatAssertions"]

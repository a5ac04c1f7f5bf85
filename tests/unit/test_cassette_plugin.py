"""The pytest plugin (fixtures, assertions with readable failures, the cassette fixture and marker),
run inside a child pytest with ``pytester``."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from chatclient import TOOL_CALL_ORDER, ChatClient
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from chatclient.testing.assertions import assert_advisor_order, assert_prompt, assert_tool_calls
from chatclient.tools import tool

pytest_plugins = ["pytester"]

PLUGIN = "chatclient.testing.pytest_plugin"
# Once the package is installed with its pytest11 entry point the plugin loads by itself.
_INSTALLED = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
ARGS = () if _INSTALLED else ("-p", PLUGIN)


@pytest.fixture(autouse=True)
def _child_ini(request: pytest.FixtureRequest) -> None:
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_fixtures_and_passing_assertions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from chatclient import ChatClient

        def test_ok(scripted_model, recording_advisor, advisor_log, chat_assert):
            scripted_model.add("Hello!")
            client = ChatClient.builder(scripted_model).default_advisors(
                recording_advisor("b", order=2), recording_advisor("a", order=1)).build()
            assert client.prompt().system("Be brief.").user("Hi").call().content() == "Hello!"
            chat_assert.advisor_order(advisor_log, ["a", "b"])
            chat_assert.prompt(scripted_model, user="Hi", system="Be brief.", contains="Hi")
        """
    )
    result = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_failures_are_readable(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from chatclient import ChatClient

        def test_order(scripted_model, recording_advisor, advisor_log, chat_assert):
            scripted_model.add("x")
            ChatClient.builder(scripted_model).default_advisors(
                recording_advisor("memory", order=1), recording_advisor("rag", order=2)).build().prompt("q").call().content()
            chat_assert.advisor_order(advisor_log, ["rag", "memory"])

        def test_prompt(scripted_model, chat_assert):
            scripted_model.add("x")
            ChatClient.create(scripted_model).prompt("What is an advisor?").call().content()
            chat_assert.prompt(scripted_model, contains="tool")
        """
    )
    result = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    for line in (
        "AssertionError: advisors ran in an unexpected order:",
        "on the way in:  expected ['rag', 'memory']",
        "actual   ['memory', 'rag']",
        "AssertionError: expected the prompt to contain 'tool'",
        "[user] 'What is an advisor?'",
    ):
        assert line in out, line
    assert "chatclient/testing/assertions.py" not in out  # the failure points at the test, not the helper


def test_cassette_fixture_takes_the_marker_path_and_the_mode_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cassette("greeting.json")
        def test_named(cassette, request):
            assert cassette.path.name == "greeting.json" and cassette.path.parent.name == "cassettes"
            assert cassette.mode == request.config.getoption("--cassette-mode")

        def test_default_name(cassette):
            assert cassette.path.name == "test_default_name.json"
        """
    )
    result = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly", "--cassette-mode=record")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "cassettes" / "greeting.json").exists()  # written on exit in record mode

    replay = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly", "-k", "named")
    replay.assert_outcomes(passed=1)  # the recording now exists, so replay opens it
    missing = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly", "-k", "default_name", "--cassette-mode=replay")
    missing.assert_outcomes(passed=1)  # recorded above too
    (pytester.path / "cassettes" / "test_default_name.json").unlink()
    gone = pytester.runpytest_inprocess(*ARGS, "-p", "no:randomly", "-k", "default_name")
    gone.assert_outcomes(errors=1)
    gone.stdout.fnmatch_lines(["*no cassette at*record it first*"])


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


def test_assertions_directly() -> None:
    log: list[str] = []
    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("1", "lookup", '{"term": "rag"}'),)), "done"])
    response = (
        ChatClient.builder(model)
        .default_advisors(RecordingAdvisor("outer", log, order=TOOL_CALL_ORDER - 1))  # outside the tool loop
        .build()
        .prompt("Define rag")
        .tools(lookup)
        .call()
    )
    assert response.content() == "done"
    assert_advisor_order(log, ["outer"])
    assert_tool_calls(response, ["lookup"], arguments={"lookup": {"term": "rag"}})
    with pytest.raises(AssertionError, match=r"expected a lookup call with arguments \{'term': 'mcp'\}"):
        assert_tool_calls(response, ["lookup"], arguments={"lookup": {"term": "mcp"}})
    with pytest.raises(AssertionError, match=r"expected tool calls \['search'\], actual \['lookup'\]"):
        assert_tool_calls(response.chat_client_response(), ["search"])
    assert_prompt(model, contains="Define rag", call=0)
    with pytest.raises(AssertionError, match="there is no call 5"):
        assert_prompt(model, call=5)
    with pytest.raises(AssertionError, match="never called"):
        assert_prompt(ScriptedChatModel([]), contains="x")

"""OpenAIModerationModel and ModerationGuardrail over real HTTP, against a loopback /v1/moderations server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from advisors import InputGuardrailAdvisor, OutputGuardrailAdvisor
from chatclient import ChatClient
from chatclient.errors import AuthenticationError, InputGuardrailError, ModelResponseError, OutputGuardrailError
from chatclient.guardrails import ModerationGuardrail
from chatclient.models.moderation import Moderation, ModerationModel, OpenAIModerationModel
from chatclient.testing import ScriptedChatModel
from tests.conftest import MODES, run_spec
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Recorded, Reply

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-moderation-SECRET-0123456789"
CATEGORIES = ("harassment", "hate", "self-harm", "sexual", "violence", "illicit")


def moderation_body(text: str, model: str) -> dict[str, Any]:
    """OpenAI's /v1/moderations shape; a text mentioning "attack" is flagged as violence."""
    violent = "attack" in text
    return {
        "id": "modr-1",
        "model": model,
        "results": [
            {
                "flagged": violent,
                "categories": {c: (violent and c == "violence") for c in CATEGORIES},
                "category_scores": {c: (0.93 if violent and c == "violence" else 0.01) for c in CATEGORIES},
                "category_applied_input_types": {c: ["text"] for c in CATEGORIES},
            }
        ],
    }


def answer(rec: Recorded) -> Reply:
    return Reply(json=moderation_body(rec.body["input"], rec.body["model"]))


def test_moderate_sends_openai_format_and_parses_the_result(server: LoopbackServer) -> None:
    server.set_default("/v1/moderations", answer)
    with OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1") as moderator:
        calm = moderator.moderate("a walk in the park")
        violent = asyncio.run(moderator.amoderate("plan an attack"))
    assert isinstance(moderator, ModerationModel)
    assert calm == Moderation(False, (), calm.scores, "omni-moderation-latest")
    assert violent.flagged and violent.categories == ("violence",)
    assert violent.scores["violence"] == pytest.approx(0.93)
    (first, second) = server.requests_to("/v1/moderations")
    assert first.method == "POST"
    assert first.body == {"model": "omni-moderation-latest", "input": "a walk in the park"}
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert second.body["input"] == "plan an attack"


def test_server_errors_are_retried_then_answered(server: LoopbackServer) -> None:
    server.script("/v1/moderations", Reply(503), Reply(json=moderation_body("fine", "m")))
    with OpenAIModerationModel("m", api_key=KEY, base_url=server.url + "/v1", max_retries=2) as moderator:
        assert moderator.moderate("fine").flagged is False
    assert len(server.requests_to("/v1/moderations")) == 2


def test_auth_failure_is_typed_and_never_echoes_the_key(server: LoopbackServer) -> None:
    server.script("/v1/moderations", Reply(401, json={"error": {"message": f"bad key {KEY}", "type": "auth"}}))
    moderator = OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1")
    with moderator, pytest.raises(AuthenticationError) as err:
        moderator.moderate("x")
    assert KEY not in str(err.value)


@pytest.mark.parametrize(
    "payload",
    [{"results": []}, {"results": [{"flagged": "yes"}]}, {"results": [{"flagged": True, "categories": []}]}, [1]],
)
def test_malformed_results_are_a_response_error(server: LoopbackServer, payload: Any) -> None:
    server.script("/v1/moderations", Reply(json=payload))
    moderator = OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1")
    with moderator, pytest.raises(ModelResponseError):
        moderator.moderate("x")


def test_an_oversized_answer_is_refused(server: LoopbackServer) -> None:
    huge = moderation_body("x", "m")
    huge["padding"] = "x" * (2 * 1024 * 1024)  # twice the default 1 MiB bound
    server.script("/v1/moderations", Reply(json=huge))
    moderator = OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
    with moderator, pytest.raises(ModelResponseError, match=r"bytes|large|limit"):
        moderator.moderate("x")


@pytest.mark.parametrize("mode", MODES)
def test_moderation_guardrail_blocks_flagged_input_before_the_model(server: LoopbackServer, mode: str) -> None:
    server.set_default("/v1/moderations", answer)
    model = ScriptedChatModel(["sure"])
    with OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1") as moderator:
        client = (
            ChatClient.builder(model).default_advisors(InputGuardrailAdvisor([ModerationGuardrail(moderator)])).build()
        )
        with pytest.raises(InputGuardrailError) as err:
            run_spec(client.prompt("help me attack my neighbour"), mode)
        assert model.prompts == []
        (failure,) = err.value.failures
        assert failure.kind == "fatal" and "violence" in failure.message
        assert "neighbour" not in str(err.value)  # the text is not quoted back
        response = run_spec(client.prompt("help me water my plants"), mode)
    assert response.chat_response is not None and response.chat_response.text == "sure"
    assert [r.body["input"] for r in server.requests_to("/v1/moderations")] == [
        "help me attack my neighbour",
        "help me water my plants",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_moderation_guardrail_checks_answers_too(server: LoopbackServer, mode: str) -> None:
    server.set_default("/v1/moderations", answer)
    model = ScriptedChatModel(["then attack them"])
    with OpenAIModerationModel(api_key=KEY, base_url=server.url + "/v1") as moderator:
        spec = (
            ChatClient.create(model)
            .prompt("what now?")
            .advisors(OutputGuardrailAdvisor([ModerationGuardrail(moderator)]))
        )
        with pytest.raises(OutputGuardrailError, match="violence"):
            run_spec(spec, mode)
    assert len(model.prompts) == 1  # fatal: no retry

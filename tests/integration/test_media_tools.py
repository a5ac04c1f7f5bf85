"""image_tool / transcription_tool / speech_tool in a real tool loop: the chat model is scripted, the
media models are the OpenAI ones talking to a loopback server with OpenAI's documented answers."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from chatclient import ChatClient
from chatclient.messages import AssistantMessage, Media, ToolCall, ToolResponseMessage
from chatclient.models.audio import OpenAISpeechModel, OpenAITranscriptionModel
from chatclient.models.images import OpenAIImageModel
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolResult, image_tool, speech_tool, transcription_tool
from tests.conftest import run_spec
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.media import documented, fields, form_parts, wav

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
DOC_PNG = base64.b64decode(documented("images_generations_gpt_image_1")["data"][0]["b64_json"])


def call(name: str, arguments: dict[str, object]) -> AssistantMessage:
    return AssistantMessage(None, (ToolCall("c1", name, json.dumps(arguments)),))


def tool_responses(model: ScriptedChatModel) -> list[ToolResponseMessage]:
    return [m for m in model.last_prompt.messages if isinstance(m, ToolResponseMessage)]


def test_image_tool_returns_the_images_as_media(server: LoopbackServer, mode: str) -> None:
    server.set_default("/v1/images/generations", Reply(json=documented("images_generations_gpt_image_1")))
    images = OpenAIImageModel(api_key="sk-test-0123456789", base_url=server.url + "/v1")
    chat = ScriptedChatModel([call("generate_image", {"prompt": "a red square"}), "Here it is."])
    drawer = image_tool(images, size="1024x1024", quality="low")
    with images:
        response = run_spec(ChatClient.create(chat).prompt("draw").tools(drawer), mode)
    assert response.chat_response is not None and response.chat_response.text == "Here it is."
    body = server.requests_to("/v1/images/generations")[0].body
    assert (body["prompt"], body["size"], body["quality"]) == ("a red square", "1024x1024", "low")
    (message,) = tool_responses(chat)
    (result,) = message.responses
    assert result.media == (Media("image/png", DOC_PNG),)
    assert "Generated 1 image(s) (image/png)" in result.response_data


def test_speech_tool_returns_the_audio(server: LoopbackServer) -> None:
    audio = wav(0.1)
    server.set_default("/v1/audio/speech", Reply(body=audio, headers={"content-type": "audio/wav"}))
    voice = OpenAISpeechModel(api_key="sk-test-0123456789", base_url=server.url + "/v1")
    chat = ScriptedChatModel([call("speak", {"text": "Hello there"}), "Done."])
    with voice:
        spec = ChatClient.create(chat).prompt("say hello").tools(speech_tool(voice, format="wav", voice="sage"))
        assert spec.call().content() == "Done."
        direct = speech_tool(voice, format="wav").call('{"text": "hi"}')
    body = server.requests_to("/v1/audio/speech")[0].body
    assert (body["input"], body["voice"], body["response_format"]) == ("Hello there", "sage", "wav")
    (result,) = tool_responses(chat)[0].responses
    assert result.media == (Media("audio/wav", audio),)
    assert isinstance(direct, ToolResult) and direct.media[0].data == audio


def test_transcription_tool_reads_only_audio_inside_its_folder(server: LoopbackServer, tmp_path: Path) -> None:
    server.set_default("/v1/audio/transcriptions", Reply(json=documented("transcription_json")))
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "1042.wav").write_bytes(wav(0.2))
    (calls / "notes.txt").write_text("secret notes")
    (tmp_path / "outside.wav").write_bytes(wav(0.2))
    (calls / "link.wav").symlink_to(tmp_path / "outside.wav")
    ears = OpenAITranscriptionModel(api_key="sk-test-0123456789", base_url=server.url + "/v1")
    listen = transcription_tool(ears, directory=calls, prompt="Acme support call")
    with ears:
        text = listen.call('{"file": "1042.wav", "language": "en"}')
        assert isinstance(text, str) and text.startswith("Imagine the wildest idea")
        for bad, why in (
            ("../outside.wav", "outside the recordings folder"),
            ("link.wav", "outside the recordings folder"),
            ("notes.txt", "not an audio file"),
            ("missing.wav", "no recording"),
        ):
            with pytest.raises(Exception, match=why):
                listen.call(json.dumps({"file": bad}))
    (rec,) = server.requests_to("/v1/audio/transcriptions")
    assert fields(form_parts(rec)) == {
        "model": ["gpt-4o-mini-transcribe"],
        "response_format": ["json"],
        "language": ["en"],
        "prompt": ["Acme support call"],
    }
    schema = listen.definition.input_schema
    assert set(schema["properties"]) == {"file", "language"} and schema["required"] == ["file"]


def test_tools_refuse_objects_that_are_not_models(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="ImageModel"):
        image_tool(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SpeechModel"):
        speech_tool(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TranscriptionModel"):
        transcription_tool(object())  # type: ignore[arg-type]
    ears = OpenAITranscriptionModel(api_key="sk-test-0123456789", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="not a directory"):
        transcription_tool(ears, directory=tmp_path / "nope")


def test_a_request_budget_counts_the_images_its_tools_draw(server: LoopbackServer) -> None:
    from advisors import BudgetAdvisor
    from chatclient.resilience.prices import DEFAULT_PRICES, ModelPrice

    server.set_default("/v1/images/generations", Reply(json=documented("images_generations_gpt_image_1")))
    images = OpenAIImageModel(api_key="sk-test-0123456789", base_url=server.url + "/v1")
    drawer = image_tool(images, size="1024x1024", quality="low")  # $0.011 an image
    prices = DEFAULT_PRICES.with_prices({"scripted": ModelPrice(input=0.0, output=0.0)})
    chat = ScriptedChatModel([call("generate_image", {"prompt": "one"}), "Drawn."])
    budget = BudgetAdvisor(max_cost=0.02, prices=prices)
    with images:
        response = ChatClient.create(chat).prompt("draw").advisors(budget).tools(drawer).call().chat_response()
        assert response is not None and response.metadata.extra["cost"] == pytest.approx(0.011)
        chat.add(call("generate_image", {"prompt": "one"}), call("generate_image", {"prompt": "two"}), "Drawn.")
        second = (
            ChatClient.create(chat)
            .prompt("draw two")
            .advisors(BudgetAdvisor(max_cost=0.015, prices=prices))
            .tools(drawer)
            .call()
            .chat_client_response()
        )
    first_image, refused = second.tool_executions
    assert not first_image.is_error
    # The second image would pass the request's budget: the tool fails (the model hears why), unsent.
    assert refused.is_error and "BudgetExceededError" in refused.result and "cost budget is 0.015" in refused.result
    assert len(server.requests_to("/v1/images/generations")) == 2

"""OpenTelemetry for the image and audio models: one ``{operation} {model}`` span per call with the
HTTP attempts below it, and the two GenAI client metrics, as chat calls have."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.trace import StatusCode

from chatclient.errors import RefusalError
from chatclient.models.audio import OpenAISpeechModel, OpenAITranscriptionModel
from chatclient.models.images import OpenAIImageModel
from chatclient.observability.otel import uninstrument
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, RawStream, Reply
from tests.support.media import documented, wav
from tests.unit.test_otel import Telemetry, attributes_of

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
KEY = "sk-otel-SECRET-0123456789abcdef"


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    uninstrument()


def test_image_call_span_holds_its_http_attempts_and_usage(server: LoopbackServer, otel: Telemetry) -> None:
    server.script(
        "/v1/images/generations",
        Reply(500, headers={"retry-after": "0"}),
        Reply(json=documented("images_generations_gpt_image_1")),
    )
    with OpenAIImageModel(api_key=KEY, base_url=server.url + "/v1") as images:
        images.generate("a fox", size="1024x1024", quality="low")
    assert otel.tree() == [("generate_image gpt-image-1", [("POST", []), ("POST", [])])]
    attrs = attributes_of(otel.one("generate_image gpt-image-1"))
    assert attrs["gen_ai.operation.name"] == "generate_image"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-image-1"
    assert attrs["gen_ai.request.image.size"] == "1024x1024" and attrs["gen_ai.request.image.quality"] == "low"
    assert attrs["chatclient.images.count"] == 1
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (50, 50)
    assert attrs["server.address"] == "127.0.0.1"
    (duration,) = otel.metric_points("gen_ai.client.operation.duration")
    assert duration.attributes["gen_ai.operation.name"] == "generate_image" and duration.count == 1
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in otel.metric_points("gen_ai.client.token.usage")}
    assert tokens == {"input": 50, "output": 50}
    for span in otel.spans:
        assert KEY not in str(attributes_of(span))


def test_audio_spans_and_failures(server: LoopbackServer, otel: Telemetry) -> None:
    audio = wav(0.2)
    server.set_default("/v1/audio/speech", RawStream([audio[:50], audio[50:]], content_type="audio/wav"))
    server.set_default("/v1/audio/transcriptions", Reply(json=documented("transcription_verbose_json")))
    with OpenAISpeechModel(api_key=KEY, base_url=server.url + "/v1") as voice:
        assert b"".join(voice.stream_speak("hello", format="wav", voice="sage")) == audio
    with OpenAITranscriptionModel("whisper-1", api_key=KEY, base_url=server.url + "/v1") as ears:
        ears.transcribe(audio, timestamps=True, language="en")
        server.set_default("/v1/audio/transcriptions", Reply(400, json=documented("error_content_policy_violation")))
        with pytest.raises(RefusalError):
            ears.transcribe(audio)
    speech = attributes_of(otel.one("speech gpt-4o-mini-tts"))
    assert speech["chatclient.audio.bytes"] == len(audio)
    assert (speech["chatclient.audio.format"], speech["chatclient.audio.voice"]) == ("wav", "sage")
    ok, refused = sorted(otel.named("transcribe whisper-1"), key=lambda s: s.start_time or 0)
    assert attributes_of(ok)["chatclient.audio.duration"] == pytest.approx(8.47)
    assert attributes_of(ok)["chatclient.audio.language"] == "en"
    assert refused.status.status_code == StatusCode.ERROR
    assert attributes_of(refused)["error.type"] == "RefusalError"

"""OpenAI (and Azure OpenAI) transcription and speech models over real HTTP against a loopback server
that answers with OpenAI's documented example responses (tests/data/openai_media)."""

from __future__ import annotations

import asyncio
import os
import pickle
from pathlib import Path

import pytest

from advisors import Budget
from chatclient.errors import ModelConnectionError, ModelResponseError, RefusalError
from chatclient.messages import Media
from chatclient.models.audio import (
    AzureOpenAISpeechModel,
    AzureOpenAITranscriptionModel,
    OpenAISpeechModel,
    OpenAITranscriptionModel,
    Speech,
    SpeechModel,
    TranscriptionModel,
    TranscriptSegment,
)
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, RawStream, Reply
from tests.support.media import documented, fields, form_parts, wav

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-audio-SECRET-0123456789abcdef"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
SPEECH = "/v1/audio/speech"
RETRY_NOW = {"retry-after": "0"}


def ears(server: LoopbackServer, name: str = "gpt-4o-mini-transcribe", **kw: object) -> OpenAITranscriptionModel:
    return OpenAITranscriptionModel(name, api_key=KEY, base_url=server.url + "/v1", **kw)  # type: ignore[arg-type]


def voice(server: LoopbackServer, name: str = "gpt-4o-mini-tts", **kw: object) -> OpenAISpeechModel:
    return OpenAISpeechModel(name, api_key=KEY, base_url=server.url + "/v1", **kw)  # type: ignore[arg-type]


# -- transcription ------------------------------------------------------------------------------------------


def test_transcribe_uploads_the_audio_and_each_field(server: LoopbackServer) -> None:
    server.set_default(TRANSCRIPTIONS, Reply(json=documented("transcription_json")))
    audio = wav(0.5)
    with ears(server) as model:
        assert isinstance(model, TranscriptionModel)
        result = model.transcribe(audio, language="en", prompt="Names: ZyntriQix", temperature=0)
    (rec,) = server.requests_to(TRANSCRIPTIONS)
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    parts = form_parts(rec)
    assert fields(parts) == {
        "model": ["gpt-4o-mini-transcribe"],
        "response_format": ["json"],
        "language": ["en"],
        "prompt": ["Names: ZyntriQix"],
        "temperature": ["0"],
    }
    (upload,) = [p for p in parts if p.filename]
    assert (upload.name, upload.filename, upload.content_type, upload.data) == ("file", "audio.wav", "audio/wav", audio)
    assert result.text.startswith("Imagine the wildest idea")
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (14, 45, 59)
    assert result.segments == [] and result.duration is None


def test_timestamps_ask_for_verbose_json_segments(server: LoopbackServer, tmp_path: Path) -> None:
    server.set_default(TRANSCRIPTIONS, Reply(json=documented("transcription_verbose_json")))
    path = tmp_path / "beach.mp3"
    path.write_bytes(b"ID3" + b"\x00" * 64)
    with ears(server, "whisper-1") as model:
        result = asyncio.run(model.atranscribe(path, timestamps=True))
    parts = form_parts(server.requests_to(TRANSCRIPTIONS)[0])
    assert fields(parts) == {
        "model": ["whisper-1"],
        "response_format": ["verbose_json"],
        "timestamp_granularities[]": ["segment"],
    }
    (upload,) = [p for p in parts if p.filename]
    assert (upload.filename, upload.content_type) == ("beach.mp3", "audio/mpeg")
    assert result.language == "english" and result.duration == pytest.approx(8.47)
    assert result.segments == [
        TranscriptSegment(0.0, pytest.approx(3.32), " The beach was a popular spot on a hot summer day."),  # type: ignore[arg-type]
        TranscriptSegment(
            pytest.approx(3.32),  # type: ignore[arg-type]
            pytest.approx(8.47),  # type: ignore[arg-type]
            " People were swimming in the ocean, building sandcastles, and playing beach volleyball.",
        ),
    ]
    assert result.metadata["billed_seconds"] == 9


def test_media_and_bytes_with_mime_type_and_plain_text_formats(server: LoopbackServer) -> None:
    server.set_default(TRANSCRIPTIONS, Reply(body="hello there\n", headers={"content-type": "text/plain"}))
    with ears(server, "whisper-1") as model:
        first = model.transcribe(Media("audio/ogg", b"OggS" + b"\x00" * 10), response_format="text")
        second = model.transcribe(b"\x00\x01raw", mime_type="audio/webm", response_format="srt")
    assert first.text == second.text == "hello there"
    one, two = (form_parts(r) for r in server.requests_to(TRANSCRIPTIONS))
    assert [(p.filename, p.content_type) for p in one if p.filename] == [("audio.ogg", "audio/ogg")]
    assert [(p.filename, p.content_type) for p in two if p.filename] == [("audio.webm", "audio/webm")]
    assert fields(two)["response_format"] == ["srt"]


def test_diarizing_model_answers_with_speakers(server: LoopbackServer) -> None:
    payload = {
        "text": "Hi. Hello.",
        "segments": [
            {"type": "transcript.text.segment", "id": "seg_0", "start": 0.0, "end": 0.8, "text": "Hi.", "speaker": "A"},
            {"type": "transcript.text.segment", "id": "seg_1", "start": 0.9, "end": 1.6, "text": "Hello.", "speaker": "B"},
        ],
    }
    server.set_default(TRANSCRIPTIONS, Reply(json=payload))
    with ears(server, "gpt-4o-transcribe-diarize") as model:
        result = model.transcribe(wav(), timestamps=True, chunking_strategy="auto")
    assert fields(form_parts(server.requests_to(TRANSCRIPTIONS)[0]))["response_format"] == ["diarized_json"]
    assert [(s.speaker, s.text) for s in result.segments] == [("A", "Hi."), ("B", "Hello.")]


@pytest.mark.parametrize(
    ("audio", "kwargs", "message"),
    [
        (b"", {}, "empty"),
        (b"\x00\x01\x02", {}, "cannot tell the audio's format"),
        (wav(), {"timestamps": True}, "without timestamps; use whisper-1"),
        (Media.from_url("https://example.com/a.mp3"), {}, "is a URL"),
        (wav(), {"language": 3}, "language must be a str"),
    ],
)
def test_bad_transcription_inputs_fail_before_http(
    server: LoopbackServer, audio: object, kwargs: dict[str, object], message: str
) -> None:
    with ears(server) as model, pytest.raises((ValueError, TypeError), match=message):
        model.transcribe(audio, **kwargs)  # type: ignore[arg-type]
    assert server.requests_to(TRANSCRIPTIONS) == []


def test_audio_over_25_mb_is_refused_naming_the_limit(server: LoopbackServer, tmp_path: Path) -> None:
    limit = r"OpenAI transcription takes at most 25 MB \(26,214,400 bytes\)"
    big = tmp_path / "long.wav"
    with open(big, "wb") as f:  # a sparse file: its size is checked before anything is read
        f.truncate(25 * 1024 * 1024 + 1)
    with ears(server) as model:
        with pytest.raises(ValueError, match=limit):
            model.transcribe(big)
        with pytest.raises(ValueError, match=limit):
            model.transcribe(b"RIFF" + bytes(25 * 1024 * 1024), mime_type="audio/wav")
    assert os.path.getsize(big) == 25 * 1024 * 1024 + 1
    assert server.requests_to(TRANSCRIPTIONS) == []


def test_transcription_retries_then_types_refusals(server: LoopbackServer) -> None:
    server.script(
        TRANSCRIPTIONS,
        Reply(429, json={"error": {"message": "slow"}}, headers=RETRY_NOW),
        Reply(500, headers=RETRY_NOW),
        Reply(json=documented("transcription_json")),
    )
    with ears(server) as model:
        assert model.transcribe(wav()).text.startswith("Imagine")
        first, second, third = server.requests_to(TRANSCRIPTIONS)
        assert first.raw == second.raw == third.raw
        server.set_default(TRANSCRIPTIONS, Reply(400, json=documented("error_content_policy_violation")))
        with pytest.raises(RefusalError):
            model.transcribe(wav())


def test_malformed_transcriptions_are_response_errors(server: LoopbackServer) -> None:
    bad: list[object] = [{"txt": "x"}, {"text": "x", "segments": "no"}, {"text": "x", "segments": [{"start": 1}]}]
    for payload in bad:
        server.set_default(TRANSCRIPTIONS, Reply(json=payload))
        with ears(server, "whisper-1") as model, pytest.raises(ModelResponseError):
            model.transcribe(wav(), timestamps=True)


# -- speech -----------------------------------------------------------------------------------------------


def test_speak_sends_each_field_and_returns_the_audio(server: LoopbackServer, tmp_path: Path) -> None:
    audio = wav(0.25)
    server.set_default(SPEECH, Reply(body=audio, headers={"content-type": "audio/wav"}))
    with voice(server, voice="coral") as model:
        assert isinstance(model, SpeechModel)
        speech = model.speak("Today is a wonderful day.", format="wav", speed=1.25, instructions="Cheerful.")
    (rec,) = server.requests_to(SPEECH)
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    assert rec.body == {
        "model": "gpt-4o-mini-tts",
        "input": "Today is a wonderful day.",
        "voice": "coral",
        "response_format": "wav",
        "speed": 1.25,
        "instructions": "Cheerful.",
    }
    assert isinstance(speech, Speech)
    assert speech.audio == audio and speech.mime_type == "audio/wav"
    assert speech.to_media() == Media("audio/wav", audio)
    assert speech.save(tmp_path / "day.wav").read_bytes() == audio
    assert "bytes" in repr(speech) and len(repr(speech)) < 80


def test_speech_mime_type_falls_back_to_the_format(server: LoopbackServer) -> None:
    server.set_default(SPEECH, Reply(body=b"\xff\xfb" + b"\x00" * 32, headers={"content-type": "application/octet-stream"}))
    with voice(server) as model:
        speech = asyncio.run(model.aspeak("hi", voice={"id": "voice_1234"}))
    assert speech.mime_type == "audio/mpeg"
    assert server.requests_to(SPEECH)[0].body["voice"] == {"id": "voice_1234"}


def test_streamed_speech_is_reassembled_from_its_chunks(server: LoopbackServer) -> None:
    audio = wav(0.5)
    frames = [audio[i : i + 997] for i in range(0, len(audio), 997)]
    server.set_default(SPEECH, RawStream(frames, content_type="audio/wav"))
    with voice(server) as model:
        chunks = list(model.stream_speak("Read this aloud.", format="wav"))

        async def collect() -> list[bytes]:
            return [c async for c in model.astream_speak("Read this aloud.", format="wav")]

        achunks = asyncio.run(collect())
    assert b"".join(chunks) == audio == b"".join(achunks)
    assert len(chunks) > 1
    assert server.requests_to(SPEECH)[0].body["input"] == "Read this aloud."


def test_streamed_speech_is_retried_before_it_starts_and_fails_typed_after(server: LoopbackServer) -> None:
    audio = wav(0.25)
    server.script(SPEECH, Reply(503, headers=RETRY_NOW), RawStream([audio[:100], audio[100:]], content_type="audio/wav"))
    with voice(server) as model:
        assert b"".join(model.stream_speak("x", format="wav")) == audio
        assert len(server.requests_to(SPEECH)) == 2
        server.set_default(SPEECH, RawStream([audio[:100]], content_type="audio/wav", end=False))
        received = []
        with pytest.raises(ModelConnectionError):
            for chunk in model.stream_speak("x", format="wav"):
                received.append(chunk)
        assert received == [audio[:100]]
    assert len(server.requests_to(SPEECH)) == 3  # a broken stream is not sent again


def test_stream_speak_checks_its_input_at_once(server: LoopbackServer) -> None:
    with voice(server) as model, pytest.raises(ValueError, match="empty"):
        model.stream_speak("  ")
    assert server.requests_to(SPEECH) == []


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("gpt-4o-mini-tts", {"text": ""}, "empty"),
        ("gpt-4o-mini-tts", {"text": "a" * 4097}, "4,097 characters; gpt-4o-mini-tts speaks at most 4,096"),
        ("gpt-4o-mini-tts", {"text": "x", "speed": 4.5}, "between 0.25 and 4.0"),
        ("gpt-4o-mini-tts", {"text": "x", "voice": ""}, "voice must be"),
        ("gpt-4o-mini-tts", {"text": "x", "format": ""}, "format must"),
        ("tts-1", {"text": "x", "instructions": "whisper"}, "takes no instructions"),
    ],
)
def test_bad_speech_inputs_fail_before_http(
    server: LoopbackServer, name: str, kwargs: dict[str, object], message: str
) -> None:
    with voice(server, name) as model, pytest.raises(ValueError, match=message):
        model.speak(**kwargs)  # type: ignore[arg-type]
    assert server.requests_to(SPEECH) == []


def test_unknown_formats_pass_through(server: LoopbackServer) -> None:
    server.set_default(SPEECH, Reply(body=b"\x00" * 8, headers={"content-type": "audio/x-custom"}))
    with voice(server) as model:
        assert model.speak("x", format="mulaw").mime_type == "audio/x-custom"
    assert server.requests_to(SPEECH)[0].body["response_format"] == "mulaw"


def test_speech_refusals_and_empty_answers(server: LoopbackServer) -> None:
    with voice(server) as model:
        server.set_default(SPEECH, Reply(400, json=documented("error_content_policy_violation")))
        with pytest.raises(RefusalError):
            model.speak("x")
        server.set_default(SPEECH, Reply(body=b"", headers={"content-type": "audio/mpeg"}))
        with pytest.raises(ModelResponseError, match="no audio"):
            model.speak("x")


# -- budgets, keys, pickling, Azure ----------------------------------------------------------------------


def test_budgets_are_charged_per_character_and_per_audio_minute(server: LoopbackServer) -> None:
    server.set_default(SPEECH, Reply(body=b"\xff\xfb\x00\x00", headers={"content-type": "audio/mpeg"}))
    server.set_default(TRANSCRIPTIONS, Reply(json=documented("transcription_verbose_json")))
    budget = Budget(max_cost=1.0, period=None)
    with voice(server, "tts-1", budget=budget) as speaker, ears(server, "whisper-1", budget=budget) as listener:
        spoken = speaker.speak("x" * 1000)
        heard = listener.transcribe(wav(), timestamps=True)
        streamed = b"".join(speaker.stream_speak("y" * 2000))
    assert spoken.metadata["cost"] == pytest.approx(0.015)  # 1,000 characters at $15 per million
    assert heard.metadata["cost"] == pytest.approx(0.006 * 8.47 / 60)  # 8.47 s at $0.006 a minute
    assert streamed
    assert budget.spent().cost == pytest.approx(0.015 + 0.006 * 8.47 / 60 + 0.03)
    assert budget.spent().calls == 3


def test_a_wav_files_length_prices_a_transcript_without_duration(server: LoopbackServer) -> None:
    server.set_default(TRANSCRIPTIONS, Reply(json=documented("transcription_json")))
    budget = Budget(max_cost=1.0, period=None)
    with ears(server, budget=budget) as model:
        result = model.transcribe(wav(30.0))
    assert result.metadata["cost"] == pytest.approx(0.003 / 2)  # 30 s at $0.003 a minute


def test_keys_never_show_and_models_pickle(server: LoopbackServer) -> None:
    server.set_default(SPEECH, Reply(body=b"\xff\xfb\x00", headers={"content-type": "audio/mpeg"}))
    for model in (ears(server), voice(server)):
        for text in (repr(model), str(model), repr(vars(model))):
            assert KEY not in text
        copy = pickle.loads(pickle.dumps(model))
        assert copy == model
        if isinstance(copy, OpenAISpeechModel):
            with copy:
                assert copy.speak("x").audio == b"\xff\xfb\x00"
        model.close()


def test_azure_twins_use_the_deployment(server: LoopbackServer) -> None:
    version = "2025-03-01-preview"
    t_path = f"/openai/deployments/ears/audio/transcriptions?api-version={version}"
    s_path = "/openai/v1/audio/speech"
    server.set_default(t_path, Reply(json=documented("transcription_json")))
    server.set_default(s_path, Reply(body=b"\xff\xfb\x00", headers={"content-type": "audio/mpeg"}))
    with AzureOpenAITranscriptionModel("ears", endpoint=server.url, api_key=KEY, api_version=version) as listener:
        listener.transcribe(wav())
    with AzureOpenAISpeechModel("mouth", endpoint=server.url, token_provider=lambda: "entra-token-123") as speaker:
        speaker.speak("x")
    t_rec, s_rec = server.requests_to(t_path)[0], server.requests_to(s_path)[0]
    assert t_rec.headers["api-key"] == KEY
    assert fields(form_parts(t_rec))["model"] == ["ears"]
    assert s_rec.headers["authorization"] == "Bearer entra-token-123"
    assert s_rec.body["model"] == "mouth"


def test_azure_streamed_speech_asks_for_a_fresh_token_after_a_401(server: LoopbackServer) -> None:
    audio = wav(0.1)
    path = "/openai/v1/audio/speech"
    server.script(path, Reply(401, json={"error": {"message": "token expired"}}))
    server.set_default(path, RawStream([audio[:20], audio[20:]], content_type="audio/wav"))
    tokens = iter(["entra-old-0001", "entra-new-0002"])
    with AzureOpenAISpeechModel("mouth", endpoint=server.url, token_provider=lambda: next(tokens)) as speaker:

        async def collect() -> bytes:
            return b"".join([c async for c in speaker.astream_speak("hi", format="wav")])

        assert asyncio.run(collect()) == audio
    seen = [r.headers["authorization"] for r in server.requests_to(path)]
    assert seen == ["Bearer entra-old-0001", "Bearer entra-new-0002"]

"""The pure parts of the audio models: transcripts parsed, WAV lengths, speech values, price units."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from chatclient.errors import ModelResponseError
from chatclient.messages import Media
from chatclient.models.audio import (
    MAX_SPEECH_CHARACTERS,
    MAX_TRANSCRIPTION_BYTES,
    OpenAISpeechModel,
    OpenAITranscriptionModel,
    Speech,
    Transcription,
    TranscriptSegment,
    _wav_seconds,
    parse_transcription,
)
from chatclient.models.media_prices import DEFAULT_MEDIA_PRICES
from tests.support.media import documented, wav


def test_parse_transcription_reads_both_documented_shapes() -> None:
    plain = parse_transcription(documented("transcription_json"))
    assert plain.usage.prompt_tokens == 14 and plain.usage.total_tokens == 59
    assert plain.language is None and plain.segments == []
    verbose = parse_transcription(documented("transcription_verbose_json"))
    assert verbose.segments[0] == TranscriptSegment(0.0, 3.319999933242798, " The beach was a popular spot on a hot summer day.")
    assert verbose.metadata == {"billed_seconds": 9.0, "task": "transcribe"}
    assert verbose.usage.is_empty()


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        {"text": 3},
        {"text": "x", "segments": {}},
        {"text": "x", "segments": [3]},
        {"text": "x", "segments": [{"start": "0", "end": 1, "text": "a"}]},
        {"text": "x", "segments": [{"start": 0, "end": 1}]},
        {"text": "x", "segments": [{"start": True, "end": 1, "text": "a"}]},
    ],
)
def test_malformed_transcripts_are_response_errors(payload: object) -> None:
    with pytest.raises(ModelResponseError):
        parse_transcription(payload)


def test_odd_but_valid_fields_are_dropped_not_fatal() -> None:
    result = parse_transcription({"text": "x", "language": 5, "duration": "long", "usage": {"input_tokens": -1}})
    assert (result.language, result.duration, result.usage.prompt_tokens) == (None, None, 0)


def test_wav_length_is_read_from_the_header() -> None:
    assert _wav_seconds(wav(2.5)) == pytest.approx(2.5)
    assert _wav_seconds(wav(1.0, rate=16000)) == pytest.approx(1.0)
    assert _wav_seconds(b"ID3" + b"\x00" * 40) is None
    assert _wav_seconds(b"RIFF\x00\x00\x00\x00WAVE") is None  # no chunks: unknown, not an error


def test_values() -> None:
    speech = Speech(b"\x00" * 100, "audio/wav")
    assert repr(speech) == "Speech(100 bytes, mime_type='audio/wav')"
    assert speech.to_media() == Media("audio/wav", b"\x00" * 100)
    text = Transcription("hi", segments=(TranscriptSegment(0, 1, "hi"),))  # type: ignore[arg-type]
    assert text.segments == [TranscriptSegment(0, 1, "hi")]
    assert MAX_TRANSCRIPTION_BYTES == 25 * 1024 * 1024 and MAX_SPEECH_CHARACTERS == 4096


def test_speech_save_writes_the_bytes(tmp_path: Path) -> None:
    assert Speech(b"abc", "audio/mpeg").save(tmp_path / "a.mp3").read_bytes() == b"abc"


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="voice"):
        OpenAISpeechModel(api_key="sk-test-0123", voice="")
    with pytest.raises(ValueError, match="voice"):
        OpenAISpeechModel(api_key="sk-test-0123", voice={"name": "x"})
    with pytest.raises(ValueError, match="max_characters"):
        OpenAISpeechModel(api_key="sk-test-0123", max_characters=0)
    with pytest.raises(ValueError, match="max_audio_bytes"):
        OpenAITranscriptionModel(api_key="sk-test-0123", max_audio_bytes=-1)
    smaller = OpenAITranscriptionModel(base_url="http://127.0.0.1:9/v1", max_audio_bytes=10)
    with pytest.raises(ValueError, match="max_audio_bytes takes at most 10 bytes"):
        smaller.transcribe(wav())
    with pytest.raises(TypeError, match="option"):
        smaller._upload(b"ID3", None, None, False, None, {"temperature": object()})


def test_audio_models_pickle_with_their_settings() -> None:
    voice = OpenAISpeechModel("tts-1", api_key="sk-test-0123456", voice="nova", max_characters=100)
    copy = pickle.loads(pickle.dumps(voice))
    assert (copy.voice, copy.max_characters, copy.model) == ("nova", 100, "tts-1")
    assert copy == voice


def test_audio_price_units() -> None:
    whisper, tts = DEFAULT_MEDIA_PRICES.find("whisper-1"), DEFAULT_MEDIA_PRICES.find("tts-1")
    assert whisper is not None and tts is not None
    assert whisper.audio(90) == pytest.approx(0.009)
    assert whisper.characters(10) is None
    assert tts.characters(2000) == pytest.approx(0.03)
    assert tts.audio(60) is None


def test_a_request_cost_budget_refuses_an_unpriced_media_call_before_http() -> None:
    from advisors import BudgetAdvisor
    from advisors.budget import _RequestMeter
    from chatclient.errors import BudgetExceededError
    from chatclient.usage_meter import media_meters, metering

    meter = _RequestMeter(BudgetAdvisor(max_cost=1.0), None)
    voice = OpenAISpeechModel("my-voice", base_url="http://127.0.0.1:9/v1")  # nothing listens there
    with metering(meter):
        assert media_meters() == (meter,)
        with pytest.raises(BudgetExceededError, match="no price for media model 'my-voice'"):
            voice.speak("x")
    assert media_meters() == ()

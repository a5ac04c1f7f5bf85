"""Audio models: transcription (speech to text) and speech (text to speech).

    from chatclient.models.audio import OpenAISpeechModel, OpenAITranscriptionModel

    with OpenAITranscriptionModel() as ears:                            # gpt-4o-mini-transcribe
        transcript = ears.transcribe("call.mp3", language="en")
        transcript.text
    with OpenAISpeechModel(voice="coral") as voice:                      # gpt-4o-mini-tts
        voice.speak("Your order has shipped.").save("shipped.mp3")
        for chunk in voice.stream_speak("A longer answer ...", format="wav"):
            player.write(chunk)                                         # bytes as they arrive

``TranscriptionModel`` and ``SpeechModel`` are the protocols. The OpenAI models speak
``/audio/transcriptions`` (a multipart upload) and ``/audio/speech`` (raw audio bytes back, whole or
streamed) on the HTTP layer of the chat models (retries, limits, typed errors, secrets scrubbed,
cassettes, pickling, spans); the Azure twins run them on an Azure OpenAI deployment, and any
OpenAI-compatible server (a local Whisper or TTS server) works through ``base_url``.

Inputs are checked before any HTTP call: empty text, audio over the upload limit (25 MB for OpenAI),
text over the speech input limit (4,096 characters) and parameters the model is known not to take
(timestamps from the gpt-4o transcribe models, ``instructions`` on tts-1) raise ``ValueError``
naming the limit; formats the table does not know are passed through, since the vendors add values.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, Unpack, runtime_checkable

from chatclient.errors import ModelResponseError
from chatclient.messages import Media
from chatclient.models.base import Usage
from chatclient.models.http.transport import BinaryAnswer
from chatclient.models.openai_media import (
    AzureDeployment,
    MediaCall,
    MediaModelOptions,
    OpenAIMediaModel,
    form_value,
    upload,
)

if TYPE_CHECKING:
    from chatclient.models.azure import TokenProvider

__all__ = [
    "AzureOpenAISpeechModel",
    "AzureOpenAITranscriptionModel",
    "OpenAISpeechModel",
    "OpenAITranscriptionModel",
    "Speech",
    "SpeechModel",
    "TranscriptSegment",
    "Transcription",
    "TranscriptionModel",
]

MAX_TRANSCRIPTION_BYTES = 25 * 1024 * 1024
"""OpenAI's upload limit for one transcription (25 MB)."""
MAX_SPEECH_CHARACTERS = 4096
"""OpenAI's limit on the text of one speech request."""
_MAX_SEGMENTS = 100_000  # segments kept from one transcript (hours of audio)
_SPEED = (0.25, 4.0)
_TEXT_FORMATS = ("text", "srt", "vtt")
_AUDIO_MIME = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}


# -- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TranscriptSegment:
    """A stretch of the transcript: ``start`` and ``end`` in seconds, its ``text`` (and the
    ``speaker`` label where the model tells speakers apart)."""

    start: float
    end: float
    text: str
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class Transcription:
    """What was said: ``text``, the ``language`` and ``duration`` (seconds) where the server reports
    them, ``segments`` with timestamps (``timestamps=True``), ``usage`` and ``metadata`` (``cost`` in
    dollars when a budget counts the call)."""

    text: str
    language: str | None = None
    duration: float | None = None
    segments: list[TranscriptSegment] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", list(self.segments))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


@dataclass(frozen=True, slots=True)
class Speech:
    """Spoken audio: the ``audio`` bytes and their ``mime_type`` (``metadata`` has ``cost`` when the
    call is counted by a budget)."""

    audio: bytes
    mime_type: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def __repr__(self) -> str:
        return f"Speech({len(self.audio)} bytes, mime_type={self.mime_type!r})"

    def to_media(self) -> Media:
        """The audio as ``Media`` (for a message or a tool result)."""
        return Media(self.mime_type, self.audio)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the audio to ``path`` and return it."""
        target = Path(path)
        target.write_bytes(self.audio)
        return target


@runtime_checkable
class TranscriptionModel(Protocol):
    """Anything that turns speech into text, blocking and async. ``audio`` is ``Media``, bytes (with
    ``mime_type=`` when the format cannot be read from them) or a file path."""

    def transcribe(
        self, audio: Any, *, language: str | None = None, prompt: str | None = None, timestamps: bool = False,
        **options: Any,
    ) -> Transcription:  # fmt: skip
        """The transcript of ``audio``; ``timestamps=True`` asks for segments."""
        ...

    async def atranscribe(
        self, audio: Any, *, language: str | None = None, prompt: str | None = None, timestamps: bool = False,
        **options: Any,
    ) -> Transcription:  # fmt: skip
        """Async ``transcribe``."""
        ...


@runtime_checkable
class SpeechModel(Protocol):
    """Anything that reads text aloud, whole or streamed, blocking and async."""

    def speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Speech:  # fmt: skip
        """The whole audio of ``text``."""
        ...

    def stream_speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Iterator[bytes]:  # fmt: skip
        """The audio of ``text`` as byte chunks, as they arrive."""
        ...

    async def aspeak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Speech:  # fmt: skip
        """Async ``speak``."""
        ...

    def astream_speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> AsyncIterator[bytes]:  # fmt: skip
        """Async ``stream_speak``."""
        ...


# -- transcription -----------------------------------------------------------------------------------


def _family(model: str) -> str:
    """Which documented family ``model`` belongs to ("" for a server's own model: nothing is known)."""
    name = model.lower()
    for family in ("gpt-4o-transcribe-diarize", "gpt-4o-mini-transcribe", "gpt-4o-transcribe", "whisper-1"):
        if name.startswith(family):
            return family
    return ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_transcription(payload: Any) -> Transcription:
    """The ``Transcription`` of an OpenAI ``/audio/transcriptions`` answer (``json``,
    ``verbose_json`` or ``diarized_json``)."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("text"), str):
        raise ModelResponseError("the transcription has no 'text'; is base_url an OpenAI-compatible audio API?")
    segments = []
    raw_segments = payload.get("segments")
    if raw_segments is not None and not isinstance(raw_segments, list):
        raise ModelResponseError("the transcription's 'segments' is not a list")
    for item in (raw_segments or [])[:_MAX_SEGMENTS]:
        if not isinstance(item, Mapping):
            raise ModelResponseError("a transcript segment is not an object")
        start, end, text = _number(item.get("start")), _number(item.get("end")), item.get("text")
        if start is None or end is None or not isinstance(text, str):
            raise ModelResponseError("a transcript segment lacks a numeric start/end or its text")
        speaker = item.get("speaker")
        segments.append(TranscriptSegment(start, end, text, speaker if isinstance(speaker, str) else None))
    language = payload.get("language")
    usage, metadata = Usage(), {}
    raw_usage = payload.get("usage")
    if isinstance(raw_usage, Mapping):
        if raw_usage.get("type") == "duration" and _number(raw_usage.get("seconds")) is not None:
            metadata["billed_seconds"] = _number(raw_usage.get("seconds"))
        else:
            tokens = {k: raw_usage.get(k) for k in ("input_tokens", "output_tokens", "total_tokens")}
            counts = {k: v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0 for k, v in tokens.items()}
            usage = Usage(counts["input_tokens"], counts["output_tokens"], reported_total_tokens=counts["total_tokens"] or None)
    for key in ("task", "logprobs"):
        if payload.get(key) is not None:
            metadata[key] = payload[key]
    return Transcription(
        payload["text"],
        language if isinstance(language, str) else None,
        _number(payload.get("duration")),
        segments,
        usage,
        metadata,
    )


def _wav_seconds(data: bytes) -> float | None:
    """The length of a PCM WAV file read from its header (for pricing before the call)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    position = 12
    byte_rate = 0
    while position + 8 <= min(len(data), 4096):
        chunk, size = data[position : position + 4], int.from_bytes(data[position + 4 : position + 8], "little")
        if chunk == b"fmt " and size >= 16:
            byte_rate = int.from_bytes(data[position + 16 : position + 20], "little")
        elif chunk == b"data" and byte_rate > 0:
            return min(size, len(data) - position - 8) / byte_rate
        position += 8 + size + (size & 1)
    return None


class OpenAITranscriptionModel(OpenAIMediaModel):
    """OpenAI transcription (``POST {base_url}/audio/transcriptions``, a multipart upload).

    ``timestamps=True`` asks for ``verbose_json`` with segment timestamps (whisper-1 and
    OpenAI-compatible Whisper servers; ``diarized_json`` with speakers on gpt-4o-transcribe-diarize);
    the gpt-4o transcribe models answer only ``json`` and raise ``ValueError`` for it. ``options``
    are passed on as form fields (``temperature``, ``include``, ``chunking_strategy``; a
    ``response_format`` of ``text``/``srt``/``vtt`` comes back as the transcript's text).
    ``max_audio_bytes`` is the upload limit (OpenAI's 25 MB by default). A ``budget`` is charged
    per audio minute where the length is known (the server's ``duration`` or billed seconds, or a
    WAV file's header).

    >>> OpenAITranscriptionModel(api_key="sk-test")
    OpenAITranscriptionModel(model='gpt-4o-mini-transcribe', base_url='https://api.openai.com/v1')
    """

    def __init__(
        self,
        model: str = "gpt-4o-mini-transcribe",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_audio_bytes: int = MAX_TRANSCRIPTION_BYTES,
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self.max_audio_bytes = _positive_int("max_audio_bytes", max_audio_bytes)
        self._connect(model, (base_url, api_key), **options)

    def _upload(
        self, audio: Any, language: str | None, prompt: str | None, timestamps: bool, mime_type: str | None,
        options: Mapping[str, Any],
    ) -> tuple[Any, dict[str, Any], float | None]:  # fmt: skip
        from chatclient.models.http.multipart import multipart_body

        family = _family(self.model)
        response_format = options.get("response_format")
        if timestamps:
            if family in ("gpt-4o-transcribe", "gpt-4o-mini-transcribe"):
                raise ValueError(
                    f"{self.model} answers only plain json, without timestamps; use whisper-1 (or "
                    "gpt-4o-transcribe-diarize) for segments"
                )
            if response_format is None:
                response_format = "diarized_json" if family == "gpt-4o-transcribe-diarize" else "verbose_json"
        for name, value in (("language", language), ("prompt", prompt)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        limit = "OpenAI transcription" if self.max_audio_bytes == MAX_TRANSCRIPTION_BYTES else "max_audio_bytes"
        part = upload(
            audio, field="file", what="audio", max_bytes=self.max_audio_bytes, limit_name=limit, mime_type=mime_type
        )
        fields: dict[str, Any] = {"model": self._wire_model(), "response_format": response_format or "json"}
        if language:
            fields["language"] = language
        if prompt:
            fields["prompt"] = prompt
        if timestamps and fields["response_format"] == "verbose_json":
            fields["timestamp_granularities[]"] = ["segment"]
        for name, value in options.items():
            if name == "response_format" or value is None:
                continue
            if isinstance(value, (list, tuple)):
                fields[name if name.endswith("[]") else f"{name}[]"] = [form_value(v, _OPTION) for v in value]
            else:
                fields[name] = form_value(value, _OPTION)
        return multipart_body(fields, [part]), fields, _wav_seconds(part.data)

    def _planned(self, seconds: float | None) -> float | None:
        return self._plan(lambda price: None if price.per_audio_minute is None else (price.audio(seconds or 0.0)))

    def transcribe(
        self, audio: Any, *, language: str | None = None, prompt: str | None = None, timestamps: bool = False,
        mime_type: str | None = None, **options: Any,
    ) -> Transcription:  # fmt: skip
        """The transcript of ``audio`` (``Media``, bytes with ``mime_type=`` or a path); ``language``
        as ISO-639-1 (``"en"``) helps accuracy; ``prompt`` guides style and spelling."""
        return self._request(self._transcription(audio, language, prompt, timestamps, mime_type, options))

    async def atranscribe(
        self, audio: Any, *, language: str | None = None, prompt: str | None = None, timestamps: bool = False,
        mime_type: str | None = None, **options: Any,
    ) -> Transcription:  # fmt: skip
        """Async ``transcribe``."""
        return await self._arequest(self._transcription(audio, language, prompt, timestamps, mime_type, options))

    def _transcription(
        self, audio: Any, language: str | None, prompt: str | None, timestamps: bool, mime_type: str | None,
        options: Mapping[str, Any],
    ) -> MediaCall[Transcription]:  # fmt: skip
        """The checked upload's call (text, srt and vtt answers come back as raw bytes)."""
        body, fields, seconds = self._upload(audio, language, prompt, timestamps, mime_type, options)
        self._planned(seconds)
        return MediaCall(
            "transcribe",
            self._path("audio/transcriptions"),
            body,
            lambda answer: self._answer(answer, seconds),
            _transcription_attributes(fields),
            binary=fields["response_format"] in _TEXT_FORMATS,
        )

    def _answer(self, payload: Any, seconds: float | None) -> Transcription:
        if isinstance(payload, BinaryAnswer):  # text, srt or vtt
            result = Transcription(payload.content.decode("utf-8", "replace").strip())
        else:
            try:
                result = parse_transcription(payload)
            except ModelResponseError as exc:
                raise ModelResponseError(self._http.scrub(str(exc))) from None
        if not self._metered():
            return result
        length = result.duration or _number(result.metadata.get("billed_seconds")) or seconds
        price = self._price()
        cost = price.audio(length) if price is not None and length is not None else None
        self._charge(result.usage, cost)
        return Transcription(
            result.text, result.language, result.duration, result.segments, result.usage, {**result.metadata, "cost": cost}
        )


def _transcription_attributes(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = {"chatclient.audio.response_format": fields["response_format"]}
    if isinstance(fields.get("language"), str):
        out["chatclient.audio.language"] = fields["language"]
    return out


_OPTION = "a transcription option"  # how a bad form value is named


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


# -- speech ------------------------------------------------------------------------------------------


class OpenAISpeechModel(OpenAIMediaModel):
    """OpenAI speech (``POST {base_url}/audio/speech``): the audio of a text, whole or streamed.

    ``voice`` is the default voice (a built-in name such as ``"alloy"`` or ``"coral"``, or a custom
    voice object ``{"id": ...}``); ``format`` one of ``mp3``, ``opus``, ``aac``, ``flac``, ``wav``,
    ``pcm`` (others are passed through); ``speed`` 0.25 to 4.0; ``instructions`` steer the delivery
    (not on tts-1/tts-1-hd). Text longer than ``max_characters`` (OpenAI's 4,096) raises
    ``ValueError`` before any HTTP call. A ``budget`` is charged per character.

    >>> OpenAISpeechModel(api_key="sk-test")
    OpenAISpeechModel(model='gpt-4o-mini-tts', base_url='https://api.openai.com/v1')
    """

    def __init__(
        self,
        model: str = "gpt-4o-mini-tts",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        voice: str | Mapping[str, str] = "alloy",
        max_characters: int = MAX_SPEECH_CHARACTERS,
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self.voice = _check_voice(voice)
        self.max_characters = _positive_int("max_characters", max_characters)
        self._connect(model, (base_url, api_key), **options)

    def _body(
        self, text: str, voice: Any, format: str, speed: float | None, instructions: str | None,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        if not isinstance(text, str):
            raise TypeError(f"the text to speak must be a str, not {type(text).__name__}")
        if not text.strip():
            raise ValueError("the text to speak is empty")
        if len(text) > self.max_characters:
            raise ValueError(
                f"the text is {len(text):,} characters; {self.model} speaks at most {self.max_characters:,} "
                "per request: split it (by paragraph) and speak the parts in turn"
            )
        if not isinstance(format, str) or not format:
            raise ValueError(f"format must name an audio format such as 'mp3' or 'wav', got {format!r}")
        if speed is not None and (
            isinstance(speed, bool) or not isinstance(speed, (int, float)) or not _SPEED[0] <= speed <= _SPEED[1]
        ):
            raise ValueError(f"speed must be between {_SPEED[0]} and {_SPEED[1]} (1.0 is normal), got {speed!r}")
        if instructions is not None and self.model.lower().startswith("tts-1"):
            raise ValueError(f"{self.model} takes no instructions (gpt-4o-mini-tts does); drop them or change model")
        body: dict[str, Any] = {
            "model": self._wire_model(),
            "input": text,
            "voice": _check_voice(voice) if voice is not None else self.voice,
            "response_format": format,
        }
        if speed is not None:
            body["speed"] = speed
        if instructions is not None:
            body["instructions"] = instructions
        body.update({k: v for k, v in options.items() if v is not None})
        return body

    def _speech_call(
        self, text: str, voice: Any, format: str, speed: float | None, instructions: str | None,
        options: Mapping[str, Any], *, streamed: bool = False,
    ) -> MediaCall[Any]:  # fmt: skip
        """The checked request's call, its cost planned first: whole (a ``Speech``) or ``streamed``
        (its ``finish`` takes the size of the audio once it has ended)."""
        body = self._body(text, voice, format, speed, instructions, options)
        planned = self._plan(lambda price: price.characters(len(text)))
        finish = (
            (lambda size: self._heard(size, planned))
            if streamed
            else (lambda answer: self._speech(answer, format, planned))
        )
        return MediaCall("speech", self._path("audio/speech"), body, finish, _speech_attributes(body), binary=True)

    def _speech(self, answer: BinaryAnswer, format: str, planned: float | None) -> Speech:
        content, content_type = answer.content, answer.content_type
        self._heard(len(content), planned)
        mime = (content_type or "").split(";")[0].strip().lower()
        if not mime.startswith("audio/"):
            mime = _AUDIO_MIME.get(format.lower(), "application/octet-stream")
        return Speech(content, mime, {"cost": planned} if self._metered() else {})

    def _heard(self, size: int, planned: float | None) -> None:
        """Charge the planned cost of ``size`` bytes of audio; none at all is a bad answer."""
        if not size:
            raise ModelResponseError(f"{self.provider} answered the speech request with no audio")
        self._charge(Usage(), planned)

    def speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Speech:  # fmt: skip
        """The whole audio of ``text``; ``options`` are passed on (``stream_format``)."""
        speech: Speech = self._request(self._speech_call(text, voice, format, speed, instructions, options))
        return speech

    async def aspeak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Speech:  # fmt: skip
        """Async ``speak``."""
        speech: Speech = await self._arequest(self._speech_call(text, voice, format, speed, instructions, options))
        return speech

    def stream_speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> Iterator[bytes]:  # fmt: skip
        """The audio of ``text`` as byte chunks as they arrive (checked now, sent when first read).

        Closing the iterator early closes the connection; the budget is charged once the audio ends.
        """
        return self._stream(self._speech_call(text, voice, format, speed, instructions, options, streamed=True))

    def astream_speak(
        self, text: str, *, voice: Any = None, format: str = "mp3", speed: float | None = None,
        instructions: str | None = None, **options: Any,
    ) -> AsyncIterator[bytes]:  # fmt: skip
        """Async ``stream_speak``."""
        return self._astream(self._speech_call(text, voice, format, speed, instructions, options, streamed=True))


def _check_voice(voice: Any) -> str | dict[str, str]:
    if isinstance(voice, str) and voice.strip():
        return voice
    if isinstance(voice, Mapping) and isinstance(voice.get("id"), str):
        return {str(k): str(v) for k, v in voice.items()}
    raise ValueError(f"voice must be a voice name such as 'alloy' or a custom voice {{'id': ...}}, got {voice!r}")


def _speech_attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"chatclient.audio.format": body["response_format"], "chatclient.audio.characters": len(body["input"])}
    if isinstance(body.get("voice"), str):
        out["chatclient.audio.voice"] = body["voice"]
    return out


# -- Azure -------------------------------------------------------------------------------------------

_AZURE_DOC = """
    On Azure OpenAI: ``endpoint`` defaults to ``AZURE_OPENAI_ENDPOINT``; the key is ``api_key`` (else
    ``AZURE_OPENAI_API_KEY``), sent as ``api-key``, or a ``token_provider`` gives an Entra ID bearer
    token for every request (asked again once after a 401). With ``api_version`` requests go to
    ``/openai/deployments/{deployment}/audio/...?api-version=``; without, to the v1 path with the
    deployment as ``model``. ``model`` names the model behind the deployment (checks and prices).
"""


class AzureOpenAITranscriptionModel(OpenAITranscriptionModel):
    __doc__ = "``OpenAITranscriptionModel`` on an Azure OpenAI deployment.\n" + _AZURE_DOC

    provider = "Azure OpenAI"
    otel_provider = "azure.ai.openai"

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        model: str = "gpt-4o-mini-transcribe",
        max_audio_bytes: int = MAX_TRANSCRIPTION_BYTES,
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self.max_audio_bytes = _positive_int("max_audio_bytes", max_audio_bytes)
        self._connect(model, (endpoint, AzureDeployment(deployment, api_version, token_provider), api_key), **options)

class AzureOpenAISpeechModel(OpenAISpeechModel):
    __doc__ = "``OpenAISpeechModel`` on an Azure OpenAI deployment.\n" + _AZURE_DOC

    provider = "Azure OpenAI"
    otel_provider = "azure.ai.openai"

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        model: str = "gpt-4o-mini-tts",
        voice: str | Mapping[str, str] = "alloy",
        max_characters: int = MAX_SPEECH_CHARACTERS,
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self.voice = _check_voice(voice)
        self.max_characters = _positive_int("max_characters", max_characters)
        self._connect(model, (endpoint, AzureDeployment(deployment, api_version, token_provider), api_key), **options)

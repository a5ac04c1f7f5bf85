"""Uploads and audio downloads of the media models against raw httpx, on a loopback server.

    .venv/bin/python benchmarks/media_upload.py

Prints, best of 11 rounds (ours and raw measured in alternation): ms to encode a 10 MB multipart body (``multipart_body``); wall ms of one
``OpenAITranscriptionModel.transcribe`` of a 10 MB WAV file against a raw ``httpx.Client`` POST of the
same file as multipart (``files=``), same server; MB/s of ``OpenAISpeechModel.stream_speak`` reading
an 8 MB audio answer against a raw ``httpx`` stream of the same answer. The server is the test
suite's loopback server (``tests/support/loopback.py``) in this process.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the loopback server of the test support

import httpx

from chatclient.models.audio import OpenAISpeechModel, OpenAITranscriptionModel
from chatclient.models.http.multipart import FilePart, multipart_body
from tests.support.loopback import LoopbackServer, RawStream, Reply
from tests.support.media import wav

ROUNDS = 11


def _ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def best_ms(fn: Callable[[], Any]) -> float:
    return min(_ms(fn) for _ in range(ROUNDS))


def best_pair(ours: Callable[[], Any], theirs: Callable[[], Any]) -> tuple[float, float]:
    """Best ms of each, measured in alternation (a loaded machine slows both alike)."""
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(_ms(ours))
        b.append(_ms(theirs))
    return min(a), min(b)


def main() -> None:
    audio = wav(10 * 1024 * 1024 / 16000, rate=8000)  # ~10 MB
    answer = wav(8 * 1024 * 1024 / 16000, rate=8000)  # ~8 MB
    mb, answer_mb = len(audio) / 1e6, len(answer) / 1e6
    part = FilePart("file", "call.wav", "audio/wav", audio)
    encode = best_ms(lambda: multipart_body({"model": "whisper-1", "response_format": "json"}, [part]))
    print(f"multipart_body, {mb:.1f} MB: {encode:.1f} ms ({mb / encode * 1000:.0f} MB/s)")
    with LoopbackServer() as server:
        server.set_default("/v1/audio/transcriptions", Reply(json={"text": "ok"}))
        frames = [answer[i : i + 65536] for i in range(0, len(answer), 65536)]
        server.set_default("/v1/audio/speech", RawStream(frames, content_type="audio/wav"))
        url = server.url + "/v1"
        with OpenAITranscriptionModel("whisper-1", base_url=url) as ears, httpx.Client() as raw:
            ours, theirs = best_pair(
                lambda: ears.transcribe(audio, mime_type="audio/wav"),
                lambda: raw.post(
                    url + "/audio/transcriptions",
                    data={"model": "whisper-1", "response_format": "json"},
                    files={"file": ("call.wav", audio, "audio/wav")},
                ).json(),
            )
        print(f"transcribe {mb:.1f} MB upload: {ours:.1f} ms, raw httpx multipart {theirs:.1f} ms ({theirs / ours:.2f}x)")
        with OpenAISpeechModel(base_url=url) as voice, httpx.Client() as raw:

            def speak() -> None:
                assert sum(len(c) for c in voice.stream_speak("x", format="wav")) == len(answer)

            def raw_stream() -> None:
                body = {"model": "gpt-4o-mini-tts", "input": "x", "voice": "alloy", "response_format": "wav"}
                with raw.stream("POST", url + "/audio/speech", json=body) as response:
                    assert sum(len(c) for c in response.iter_bytes()) == len(answer)

            ours, theirs = best_pair(speak, raw_stream)
        print(
            f"stream_speak {answer_mb:.1f} MB: {answer_mb / ours * 1000:.0f} MB/s, raw httpx stream "
            f"{answer_mb / theirs * 1000:.0f} MB/s ({theirs / ours:.2f}x)"
        )


if __name__ == "__main__":
    main()

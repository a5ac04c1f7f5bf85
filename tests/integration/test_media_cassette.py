"""Cassettes for the image and audio models: multipart uploads stored as their parts, binary answers
as base64; recorded against the loopback server, replayed while the server answers something else."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chatclient.errors import CassetteMismatchError
from chatclient.models.audio import OpenAISpeechModel, OpenAITranscriptionModel
from chatclient.models.images import OpenAIImageModel
from chatclient.testing import Cassette
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, RawStream, Reply
from tests.support.media import documented, png, wav

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
KEY = "sk-cassette-media-0123456789abcdef"


def test_uploads_and_audio_replay_from_the_file(server: LoopbackServer, tmp_path: Path) -> None:
    path = tmp_path / "media.json"
    audio, picture = wav(0.1), png(2, 2)
    server.set_default("/v1/audio/transcriptions", Reply(json=documented("transcription_json")))
    server.set_default("/v1/audio/speech", RawStream([audio[:40], audio[40:]], content_type="audio/wav"))
    server.set_default("/v1/images/edits", Reply(json=documented("images_edits_gpt_image_1")))

    def models(cassette: Cassette) -> tuple[OpenAITranscriptionModel, OpenAISpeechModel, OpenAIImageModel]:
        common = {
            "api_key": KEY,
            "base_url": server.url + "/v1",
            "http_client": cassette.http_client(),
            "async_http_client": cassette.async_http_client(),
        }
        return OpenAITranscriptionModel(**common), OpenAISpeechModel(**common), OpenAIImageModel(**common)  # type: ignore[arg-type]

    with Cassette(path, mode="record") as cassette:
        ears, voice, images = models(cassette)
        heard = ears.transcribe(audio, language="en").text
        spoken = b"".join(voice.stream_speak("hello", format="wav"))
        edited = images.edit("brighter", picture).image.data
    stored = path.read_text()
    assert KEY not in stored
    interactions = json.loads(stored)["interactions"]
    upload = interactions[0]["request"]["body"]["multipart"]
    assert {"name": "language", "value": "en"} in upload
    (file_part,) = [p for p in upload if "filename" in p]
    assert (file_part["content_type"], file_part["bytes"]) == ("audio/wav", len(audio))
    assert "base64" in interactions[1]["response"]

    # The server now answers differently: what comes back must come from the file.
    server.set_default("/v1/audio/transcriptions", Reply(json={"text": "live"}))
    server.set_default("/v1/audio/speech", Reply(body=b"live", headers={"content-type": "audio/wav"}))
    with Cassette(path) as cassette:
        ears, voice, images = models(cassette)
        assert ears.transcribe(audio, language="en").text == heard
        assert voice.speak("hello", format="wav").audio == spoken == audio
        assert asyncio.run(images.aedit("brighter", picture)).image.data == edited
        with pytest.raises(CassetteMismatchError):
            ears.transcribe(wav(0.2), language="en")  # other audio: another digest
    assert len(server.requests_to("/v1/audio/transcriptions")) == 1


def test_a_malformed_binary_answer_is_a_cassette_error(tmp_path: Path) -> None:
    from chatclient.errors import CassetteError

    path = tmp_path / "bad.json"
    bad = {"request": {"method": "POST", "path": "/v1/audio/speech"}, "response": {"status": 200, "base64": 5}}
    path.write_text(json.dumps({"format": "chatclient-cassette/1", "interactions": [bad]}))
    with pytest.raises(CassetteError, match="'base64' must be a string"), Cassette(path):
        pass

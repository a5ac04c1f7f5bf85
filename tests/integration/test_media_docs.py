"""docs/guide/images-and-audio.md: its snippets run, in order, against a loopback OpenAI server that
answers with the documented examples, and print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, RawStream, Reply
from tests.support.media import documented, fields, form_parts, wav

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "images-and-audio.md"


def test_the_guide_snippets_run_and_print_what_the_page_shows(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audio = wav(0.05)
    server.set_default("/v1/images/generations", Reply(json=documented("images_generations_gpt_image_1")))
    server.set_default("/v1/images/edits", Reply(json=documented("images_edits_gpt_image_1")))
    server.set_default("/v1/audio/transcriptions", Reply(json=documented("transcription_verbose_json")))
    server.script("/v1/audio/speech", Reply(body=audio, headers={"content-type": "audio/wav"}))
    server.set_default("/v1/audio/speech", RawStream([audio[:300], audio[300:]], content_type="audio/wav"))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-guide-0123456789")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "call.wav").write_bytes(wav(1.0))

    page = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    shown = "".join(re.findall(r"```text\n(.*?)```", page, flags=re.DOTALL)).splitlines()
    assert len(blocks) >= 9 and shown
    namespace: dict[str, object] = {"__name__": "media_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)  # our own documentation
    assert out.getvalue().splitlines() == shown
    # What the snippets did reached the server as the page says.
    assert (tmp_path / "fox.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "answer.wav").read_bytes() == audio
    edit = form_parts(server.requests_to("/v1/images/edits")[0])
    assert fields(edit)["input_fidelity"] == ["high"] and [p.filename for p in edit if p.filename] == ["image.png"]
    assert server.requests_to("/v1/audio/speech")[0].body["voice"] == "coral"

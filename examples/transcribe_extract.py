"""Transcribe a support call, then extract a typed ticket from the transcript with ``entity(T)``.

    python examples/transcribe_extract.py                 # offline
    python examples/transcribe_extract.py call.mp3        # with OPENAI_API_KEY: your recording

Offline, the recording is a generated WAV file and the transcription server is a stand-in started
by this script on 127.0.0.1 that answers in OpenAI's ``/v1/audio/transcriptions`` format: the upload
is a real multipart request over real HTTP, through the same HTTP layer as every model. The ticket
is extracted by ``ScriptedChatModel``; ``CHATCLIENT_MODEL=local`` extracts with the embedded model
instead, and ``OPENAI_API_KEY`` (or ``CHATCLIENT_BASE_URL``) with a served one. With
``OPENAI_API_KEY`` and a file argument, the file is transcribed by OpenAI (gpt-4o-mini-transcribe).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import os
import struct
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _support import make_model
from pydantic import BaseModel, Field

from chatclient import ChatClient
from chatclient.models.audio import OpenAITranscriptionModel
from chatclient.testing import ScriptedChatModel

CALL = (
    "Hi, this is Dana Whitfield. My order A-10432 arrived this morning with a cracked screen. "
    "I'd like my money back, please; I don't want a replacement."
)


class SupportTicket(BaseModel):
    customer: str = Field(description="The caller's full name")
    order_id: str = Field(description="The order number, as said")
    issue: str = Field(description="What is wrong, in a few words")
    wants_refund: bool


SCRIPT = [
    '{"customer": "Dana Whitfield", "order_id": "A-10432", "issue": "screen cracked on arrival", '
    '"wants_refund": true}'
]


class _StandIn(BaseHTTPRequestHandler):
    """Answers POST /v1/audio/transcriptions as OpenAI documents it, after reading the upload."""

    uploads: list[dict[str, str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        head = f"Content-Type: {self.headers['content-type']}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        seen: dict[str, str] = {}
        for part in form.iter_parts():
            name = str(part.get_param("name", header="content-disposition"))
            data = part.get_payload(decode=True)
            assert isinstance(data, bytes)
            seen[name] = f"{part.get_content_type()}, {len(data)} bytes" if name == "file" else data.decode()
        self.uploads.append(seen)
        answer = json.dumps({"text": CALL, "usage": {"type": "tokens", "input_tokens": 41, "output_tokens": 36,
                                                     "total_tokens": 77}}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def stand_in_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def silent_wav(seconds: float, rate: int = 8000) -> bytes:
    """A real (silent) mono 16-bit WAV recording."""
    data = b"\x00\x00" * int(seconds * rate)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    chunks = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(chunks)) + chunks


def transcribe(path: Path, base_url: str | None) -> str:
    with OpenAITranscriptionModel(base_url=base_url) as ears:
        transcript = ears.transcribe(path, language="en", prompt="An order number looks like A-10432.")
    print("transcript:", transcript.text)
    return transcript.text


def main() -> None:
    if len(sys.argv) > 1 and os.environ.get("OPENAI_API_KEY"):
        text = transcribe(Path(sys.argv[1]), None)
    else:
        with tempfile.TemporaryDirectory() as folder, stand_in_server() as url:
            recording = Path(folder) / "call-1042.wav"
            recording.write_bytes(silent_wav(2.0))
            text = transcribe(recording, url)
            (upload,) = _StandIn.uploads
            print("uploaded:", ", ".join(f"{k}={v}" for k, v in upload.items()))

    model = make_model(ScriptedChatModel(SCRIPT))
    ticket = (
        ChatClient.create(model)
        .prompt()
        .system("You file support tickets from call transcripts.")
        .user(f"File a ticket for this call:\n\n{text}")
        .call()
        .entity(SupportTicket)
    )
    print("ticket:", ticket)


if __name__ == "__main__":
    main()

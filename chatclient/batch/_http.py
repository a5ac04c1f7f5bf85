"""The control-plane HTTP of the batch APIs: JSON calls, a multipart upload and bounded JSONL downloads.

It borrows the provider model's base URL, headers (its key) and secrets, maps failures to the same
typed errors as a chat call (``error_for_status``), retries 429/5xx/connection failures with the
model's retry policy, and never keeps a connection between calls (a batch job polls every few
seconds at most, and a job object must pickle). The upload is a POST like a chat call's and is
sent by the model's ``HTTPTransport`` itself (``multipart_body``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from chatclient import jsonsafe
from chatclient.errors import BatchError, ModelError
from chatclient.models.http.error_mapping import _transport_error, error_for_status
from chatclient.models.http.transport import HTTPTransport

__all__ = ["BatchHTTP"]

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest results line read (one answer); a longer one is a ``BatchError``."""


class BatchHTTP:
    """Requests against ``transport``'s base URL with its headers; ``max_download_bytes`` bounds a results file."""

    def __init__(self, transport: HTTPTransport, *, max_download_bytes: int = 2 * 1024**3) -> None:
        self.t = transport
        self.max_download_bytes = max_download_bytes

    def _url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.t.base_url + path

    def _headers(self, *, json_body: bool) -> dict[str, str]:
        headers = dict(self.t._headers)
        if not json_body:
            headers.pop("content-type", None)
        return headers

    def _attempts(self, method: str, path: str, *, limit: int = 64 * 1024**2, **kwargs: Any) -> httpx.Response:
        retries = 0
        url = self._url(path)
        while True:
            headers: httpx.Headers | None = None
            try:
                with httpx.Client(timeout=self.t.timeout) as client, client.stream(method, url, **kwargs) as response:
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise BatchError(
                                f"the answer of {self.t.provider} to {method} {path} is larger than {limit} bytes; "
                                "raise max_download_bytes on the batch object if the file is really that large"
                            )
                        chunks.append(chunk)
                    response._content = b"".join(chunks)
                if response.status_code < 400:
                    return response
                headers = response.headers
                error: ModelError = error_for_status(
                    self.t.provider,
                    response.status_code,
                    response.text,
                    response.headers,
                    self.t._secrets,
                    url=url,
                    credential=self.t.credential,
                )
            except httpx.RequestError as exc:
                error = _transport_error(self.t.provider, exc, self.t._secrets, url)
            delay = self.t.retry.delay(retries, error, headers)
            if delay is None:
                raise error
            retries += 1
            time.sleep(delay)

    def json(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request; the decoded JSON answer."""
        if body is None:
            response = self._attempts(method, path, headers=self._headers(json_body=False))
        else:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            response = self._attempts(method, path, content=content, headers=self._headers(json_body=True))
        return self.t._decode(response.text)

    def raw_json(self, method: str, path: str, content: bytes) -> Any:
        """A request whose JSON body is already encoded; the decoded JSON answer."""
        response = self._attempts(method, path, content=content, headers=self._headers(json_body=True))
        return self.t._decode(response.text)

    def upload(self, path: str, *, data: dict[str, str], filename: str, content: bytes) -> Any:
        """A multipart/form-data upload of one file; the decoded JSON answer.

        A POST like a chat call's: it goes through the transport itself (its retries, redirects,
        response bound and typed errors), the body encoded once so that a retry resends its bytes."""
        from chatclient.models.http.multipart import FilePart, multipart_body

        return self.t.post(path, multipart_body(data, [FilePart("file", filename, "application/jsonl", content)]))

    def jsonl(self, path: str) -> Iterator[tuple[int, Any]]:
        """The lines of a JSONL file as (line number from 1, decoded object); blank lines skipped."""
        response = self._attempts("GET", path, limit=self.max_download_bytes, headers=self._headers(json_body=False))
        body = response.content
        for number, raw in enumerate(body.split(b"\n"), start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                raise BatchError(f"line {number} of the results file at {path} is longer than {MAX_LINE_BYTES} bytes")
            try:
                yield number, jsonsafe.loads(raw)  # bounded depth: a hostile line is not a RecursionError
            except ValueError as exc:
                raise BatchError(f"line {number} of the results file at {path} is not JSON ({exc})") from None

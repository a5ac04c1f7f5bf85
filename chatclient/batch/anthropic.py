"""Anthropic's Message Batches API: many Messages requests in one job, half the price.

    from chatclient.batch import AnthropicBatch

    batch = AnthropicBatch(AnthropicChatModel("claude-sonnet-4-5"))
    job = batch.submit([client.prompt(doc) for doc in documents])
    answers = [r.value.text for r in job.wait().results() if r.ok]

The wire format: ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``,
``GET /v1/messages/batches/{id}`` (``processing_status`` ``in_progress`` / ``canceling`` /
``ended``, ``request_counts``, ``results_url``), ``POST /v1/messages/batches/{id}/cancel``, and the
results JSONL at ``results_url``: ``{"custom_id", "result": {"type": "succeeded", "message"}}`` or
``errored`` (with ``error``), ``canceled``, ``expired``. Limits: 100,000 requests and 256 MB per
batch (bigger submissions become several jobs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from chatclient.errors import BatchError, BatchItemError, ModelHTTPError
from chatclient.models.base import ChatResponse

from .jobs import BatchAPI, BatchJob

__all__ = ["AnthropicBatch", "BatchJob"]

_REQUEST_INDEX = re.compile(r"requests\.(\d+)")


class AnthropicBatch(BatchAPI):
    """Message batches on ``model``'s base URL and key (an ``AnthropicChatModel``)."""

    provider = "Anthropic"
    default_max_lines = 100_000
    default_max_bytes = 256 * 1024 * 1024
    path = "/v1/messages/batches"

    def _check_model(self, model: Any) -> None:
        from chatclient.models.anthropic import AnthropicChatModel

        if not isinstance(model, AnthropicChatModel):
            raise TypeError(
                "AnthropicBatch(model) needs an AnthropicChatModel (its base URL and key are used), "
                f"got {type(model).__name__}"
            )

    def _line(self, cid: str, body: dict[str, Any]) -> bytes:
        # The params are spliced in as the exact bytes a synchronous call sends.
        return b'{"custom_id":' + json.dumps(cid).encode() + b',"params":' + self.encode(body) + b"}"

    def _create(self, lines: list[tuple[str, bytes]], first: int) -> str:
        # The lines are already JSON: splice them into the request without decoding them again.
        content = b'{"requests":[' + b",".join(line for _, line in lines) + b"]}"
        try:
            job = self.http.raw_json("POST", self.path, content)
        except ModelHTTPError as exc:
            match = _REQUEST_INDEX.search(str(exc))
            if exc.status == 400 and match is not None:
                index = first + int(match.group(1))
                raise BatchError(
                    f"Anthropic rejected the batch because of item {index} (custom_id item-{index}): {exc}"
                ) from exc
            raise
        return self._id_in(job, "a batch id")

    def _retrieve(self, part: str) -> dict[str, Any]:
        info = self.http.json("GET", f"{self.path}/{part}")
        if not isinstance(info, dict) or "processing_status" not in info:
            raise BatchError(f"unexpected Anthropic message batch object for {part!r}: {str(info)[:200]!r}")
        return info

    def _status(self, info: dict[str, Any]) -> str:
        return str(info.get("processing_status"))

    def _finished(self, info: dict[str, Any]) -> bool:
        return info.get("processing_status") == "ended"

    def _counts(self, info: dict[str, Any]) -> tuple[int, int]:
        c = info.get("request_counts") or {}
        done = sum(int(c.get(k) or 0) for k in ("succeeded", "errored", "canceled", "expired"))
        return done, done + int(c.get("processing") or 0)

    def _cancel(self, part: str) -> None:
        self.http.json("POST", f"{self.path}/{part}/cancel", {})

    def _results(self, part: str, info: dict[str, Any]) -> Iterator[tuple[Any, ChatResponse | BaseException]]:
        url = info.get("results_url") or f"{self.path}/{part}/results"
        for number, row in self.http.jsonl(str(url)):
            if not isinstance(row, dict) or not isinstance(row.get("result"), dict):
                raise BatchError(f"line {number} of the results of batch {part!r} has no result object")
            yield row.get("custom_id"), self._outcome(row)

    def _outcome(self, row: dict[str, Any]) -> ChatResponse | BaseException:
        cid = row.get("custom_id")
        result = row["result"]
        kind = result.get("type")
        if kind == "succeeded":
            try:
                return self.parse(result.get("message"))
            except Exception as exc:  # a malformed answer is that item's error
                return exc
        if kind == "errored":
            err = result.get("error") or {}
            nested = err.get("error")
            inner: dict[str, Any] = nested if isinstance(nested, dict) else err
            return BatchItemError(
                f"{cid}: {inner.get('type', 'error')}: {inner.get('message', '')}", kind="errored", custom_id=cid
            )
        if kind in ("canceled", "expired"):
            return BatchItemError(f"{cid}: {kind} before it ran", kind=str(kind), custom_id=cid)
        return BatchError(f"{cid}: unknown result type {str(kind)[:40]!r}")

"""OpenAI's Batch API: a JSONL file of Chat Completions requests, half the price, answers within 24 h.

    from chatclient.batch import OpenAIBatch

    batch = OpenAIBatch(OpenAIChatModel("gpt-4o-mini"))
    job = batch.submit([client.prompt(doc) for doc in documents], entity=Person)
    print(job.id)                      # keep it: OpenAIBatch(model).attach(job_id) in another process
    people = [r.value for r in job.wait().results() if r.ok]

The wire format (``POST /files`` with ``purpose=batch``, ``POST /batches``, ``GET /batches/{id}``,
``POST /batches/{id}/cancel``, ``GET /files/{id}/content``): each input line is ``{"custom_id",
"method": "POST", "url": "/v1/chat/completions", "body"}``; each output line ``{"custom_id",
"response": {"status_code", "body"}, "error"}``, failures in the job's error file. Limits: 50,000
lines and 200 MB per file (bigger submissions become several jobs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from chatclient.errors import BatchError, BatchItemError
from chatclient.models.base import ChatResponse
from chatclient.models.http.error_mapping import error_for_status

from .jobs import BatchAPI, BatchJob

__all__ = ["BatchJob", "OpenAIBatch"]

_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class OpenAIBatch(BatchAPI):
    """Batches of Chat Completions on ``model``'s base URL and key (an ``OpenAIChatModel``)."""

    provider = "OpenAI"
    default_max_lines = 50_000
    default_max_bytes = 200 * 1024 * 1024
    endpoint = "/v1/chat/completions"
    completion_window = "24h"

    def _check_model(self, model: Any) -> None:
        from chatclient.models.openai import OpenAIChatModel

        if not isinstance(model, OpenAIChatModel):
            raise TypeError(
                f"OpenAIBatch(model) needs an OpenAIChatModel (its base URL and key are used), got {type(model).__name__}"
            )

    def _line(self, cid: str, body: dict[str, Any]) -> bytes:
        # The body is spliced in as the exact bytes a synchronous call sends.
        head = json.dumps({"custom_id": cid, "method": "POST", "url": self.endpoint}, separators=(",", ":"))
        return head[:-1].encode() + b',"body":' + self.encode(body) + b"}"

    def _create(self, lines: list[tuple[str, bytes]], first: int) -> str:
        content = b"\n".join(line for _, line in lines) + b"\n"
        uploaded = self.http.upload("/files", data={"purpose": "batch"}, filename="batch.jsonl", content=content)
        file_id = self._id_in(uploaded, "a file id for the batch input")
        job = self.http.json(
            "POST",
            "/batches",
            {
                "input_file_id": file_id,
                "endpoint": self.endpoint,
                "completion_window": self.completion_window,
                # where this part starts, so a rejected line is named by its item (also after attach)
                "metadata": {"chatclient_first_item": str(first)},
            },
        )
        return self._id_in(job, "a batch id")

    def _retrieve(self, part: str) -> dict[str, Any]:
        info = self.http.json("GET", f"/batches/{part}")
        if not isinstance(info, dict) or "status" not in info:
            raise BatchError(f"unexpected OpenAI batch object for {part!r}: {str(info)[:200]!r}")
        return info

    def _failure(self, part: str, info: dict[str, Any]) -> str | None:
        if info.get("status") != "failed":
            return None
        first = (info.get("metadata") or {}).get("chatclient_first_item")
        errors = (info.get("errors") or {}).get("data") or []
        said = []
        for err in errors[:5]:
            line = err.get("line")
            where = f"line {line}" if line is not None else "the file"
            if isinstance(line, int) and isinstance(first, str) and first.isdigit():
                index = int(first) + line - 1
                where += f" (item {index}, custom_id item-{index})"
            said.append(f"{where}: {err.get('code')}: {err.get('message')}")
        detail = "; ".join(said) if said else "no reason given"
        return f"OpenAI rejected the input file of batch {part!r}: {detail}"

    def _status(self, info: dict[str, Any]) -> str:
        return str(info.get("status"))

    def _finished(self, info: dict[str, Any]) -> bool:
        return info.get("status") in _ENDED

    def _counts(self, info: dict[str, Any]) -> tuple[int, int]:
        counts = info.get("request_counts") or {}
        return int(counts.get("completed") or 0) + int(counts.get("failed") or 0), int(counts.get("total") or 0)

    def _cancel(self, part: str) -> None:
        self.http.json("POST", f"/batches/{part}/cancel", {})

    def _missing(self, info: dict[str, Any]) -> str:
        return {"expired": "expired", "cancelled": "canceled"}.get(str(info.get("status")), "missing")

    def _results(self, part: str, info: dict[str, Any]) -> Iterator[tuple[Any, ChatResponse | BaseException]]:
        for key in ("output_file_id", "error_file_id"):
            file_id = info.get(key)
            if not file_id:
                continue
            for number, row in self.http.jsonl(f"/files/{file_id}/content"):
                if not isinstance(row, dict):
                    raise BatchError(f"line {number} of the results of batch {part!r} is not an object")
                yield row.get("custom_id"), self._outcome(row)

    def _outcome(self, row: dict[str, Any]) -> ChatResponse | BaseException:
        cid = row.get("custom_id")
        error = row.get("error")
        response = row.get("response") or {}
        status = response.get("status_code")
        if not error and status == 200:
            try:
                return self.parse(response.get("body"))
            except Exception as exc:  # a malformed answer is that item's error
                return exc
        if error:
            code = str(error.get("code") or "error")
            kind = "expired" if code == "batch_expired" else ("canceled" if code == "batch_cancelled" else "errored")
            return BatchItemError(f"{cid}: {code}: {error.get('message')}", kind=kind, custom_id=cid)
        body = response.get("body")
        text = json.dumps(body) if not isinstance(body, str) else body
        return error_for_status("OpenAI", int(status or 500), text, None, self.transport._secrets)

"""Loopback fakes of the OpenAI Batch API and Anthropic's Message Batches API, from the vendors' documented shapes.

Both sit on a ``LoopbackServer``: they register the create endpoints, then the per-job paths as
jobs are made. A job moves on by one step per poll (OpenAI ``validating`` -> ``in_progress`` ->
``finalizing`` -> ``completed``; Anthropic ``in_progress`` -> ``ended``) and answers each line with
``answer(body)`` (a provider payload, or an ``Exception`` for an item-level error). Faults:
``expire_after`` (only that many items are answered; the job ends ``expired``), ``reject_line``
(OpenAI: the file fails validation at that line; Anthropic: the create call is a 400 naming the
request), ``extra_custom_id`` (the results name an item never sent), ``drop_custom_id`` (the results
leave that item out), ``report_total`` (the job's request counts claim that many requests).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import LoopbackServer, Recorded, Reply, anthropic_message, openai_completion

Answer = Callable[[dict[str, Any]], Any]


def _echo_openai(body: dict[str, Any]) -> Any:
    return openai_completion(f"echo {body['messages'][-1]['content']}", usage=(5, 2))


def _echo_anthropic(body: dict[str, Any]) -> Any:
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    return anthropic_message(f"echo {text}", usage=(6, 3))


def parse_multipart(rec: Recorded) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data request: name -> (filename, bytes)."""
    head = f"Content-Type: {rec.headers['content-type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + rec.raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        fields[name] = (part.get_filename(), part.get_payload(decode=True))
    return fields


def _public(job: dict[str, Any]) -> dict[str, Any]:
    """A fake job as the API shows it: without the fake's own ``_`` bookkeeping keys."""
    return {k: v for k, v in job.items() if not k.startswith("_")}


@dataclass
class FakeOpenAIBatches:
    server: LoopbackServer
    answer: Answer = _echo_openai
    steps: int = 2
    expire_after: int | None = None
    reject_line: int | None = None
    extra_custom_id: str | None = None
    drop_custom_id: str | None = None
    report_total: int | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    canceled: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.server.set_default("/v1/files", self._upload)
        self.server.set_default("/v1/batches", self._create)

    def _upload(self, rec: Recorded) -> Reply:
        fields = parse_multipart(rec)
        if fields.get("purpose", (None, b""))[1] != b"batch":
            return Reply(400, json={"error": {"message": "purpose must be batch", "type": "invalid_request_error"}})
        file_id = f"file-{next(self._ids)}"
        self._file(file_id, fields["file"][1])
        return Reply(200, json={"id": file_id, "object": "file", "bytes": len(fields["file"][1]), "purpose": "batch"})

    def _file(self, file_id: str, content: bytes) -> None:
        self.files[file_id] = content
        self.server.set_default(f"/v1/files/{file_id}/content", Reply(200, body=content))

    def input_lines(self, job_id: str) -> list[dict[str, Any]]:
        raw = self.files[self.jobs[job_id]["input_file_id"]]
        return [json.loads(line) for line in raw.split(b"\n") if line.strip()]

    def _create(self, rec: Recorded) -> Reply:
        body = rec.body
        if body.get("endpoint") != "/v1/chat/completions" or body.get("input_file_id") not in self.files:
            return Reply(400, json={"error": {"message": "bad batch request", "type": "invalid_request_error"}})
        job_id = f"batch_{next(self._ids)}"
        lines = [json.loads(x) for x in self.files[body["input_file_id"]].split(b"\n") if x.strip()]
        job: dict[str, Any] = {
            "id": job_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "metadata": body.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "_polls": 0,
        }
        self.jobs[job_id] = job
        self.server.set_default(f"/v1/batches/{job_id}", lambda r: self._get(job_id))
        self.server.set_default(f"/v1/batches/{job_id}/cancel", lambda r: self._cancel(job_id))
        return Reply(200, json=_public(job))

    def _get(self, job_id: str) -> Reply:
        job = self.jobs[job_id]
        if job["status"] in ("completed", "failed", "expired", "cancelled"):
            return Reply(200, json=_public(job))
        job["_polls"] += 1
        lines = self.input_lines(job_id)
        if job["status"] == "validating" and self.reject_line is not None and self.reject_line <= len(lines):
            job["status"] = "failed"
            job["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": "bad line", "param": "body", "line": self.reject_line}],
            }
            return Reply(200, json=_public(job))
        if job["_polls"] < self.steps:
            job["status"] = "in_progress"
            job["request_counts"]["completed"] = len(lines) // 2
            return Reply(200, json=_public(job))
        self._finish(job_id, "completed")
        return Reply(200, json=_public(job))

    def _finish(self, job_id: str, status: str) -> None:
        job = self.jobs[job_id]
        out: list[bytes] = []
        err: list[bytes] = []
        lines = self.input_lines(job_id)
        limit = len(lines) if self.expire_after is None else self.expire_after
        if status == "cancelled":
            limit = len(lines) // 2
        for n, line in enumerate(lines):
            cid = line["custom_id"]
            if cid == self.drop_custom_id:
                continue
            if n >= limit:
                if status == "completed":
                    status = "expired"
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append(self._row(cid, None, {"code": code, "message": "not run"}))
                continue
            answer = self.answer(line["body"])
            if isinstance(answer, Exception):
                err.append(
                    self._row(
                        cid,
                        {
                            "status_code": 400,
                            "request_id": "r",
                            "body": {"error": {"message": str(answer), "type": "invalid_request_error"}},
                        },
                        None,
                    )
                )
            else:
                out.append(self._row(cid, {"status_code": 200, "request_id": "r", "body": answer}, None))
        if self.extra_custom_id is not None:
            out.append(self._row(self.extra_custom_id, {"status_code": 200, "body": openai_completion("x")}, None))
        job["status"] = status
        job["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        if self.report_total is not None:
            job["request_counts"] = {"total": self.report_total, "completed": self.report_total, "failed": 0}
        if out:
            job["output_file_id"] = f"file-out-{job_id}"
            self._file(job["output_file_id"], b"\n".join(out) + b"\n")
        if err:
            job["error_file_id"] = f"file-err-{job_id}"
            self._file(job["error_file_id"], b"\n".join(err) + b"\n")

    @staticmethod
    def _row(cid: str, response: Any, error: Any) -> bytes:
        return json.dumps({"id": f"batch_req_{cid}", "custom_id": cid, "response": response, "error": error}).encode()

    def _cancel(self, job_id: str) -> Reply:
        self.canceled.append(job_id)
        self._finish(job_id, "cancelled")
        return Reply(200, json=_public(self.jobs[job_id]))


@dataclass
class FakeAnthropicBatches:
    server: LoopbackServer
    answer: Answer = _echo_anthropic
    steps: int = 2
    expire_after: int | None = None
    reject_request: int | None = None
    extra_custom_id: str | None = None
    drop_custom_id: str | None = None
    report_total: int | None = None
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    canceled: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.server.set_default("/v1/messages/batches", self._create)

    def _create(self, rec: Recorded) -> Reply:
        reqs = rec.body["requests"]
        if self.reject_request is not None and self.reject_request < len(reqs):
            return Reply(
                400,
                json={
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"requests.{self.reject_request}.params.max_tokens: Field required",
                    },
                },
            )
        job_id = f"msgbatch_{next(self._ids)}"
        self.requests[job_id] = reqs
        job = {
            "id": job_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "results_url": None,
            "_polls": 0,
        }
        self.jobs[job_id] = job
        path = f"/v1/messages/batches/{job_id}"
        self.server.set_default(path, lambda r: self._get(job_id))
        self.server.set_default(path + "/cancel", lambda r: self._cancel(job_id))
        return Reply(200, json=_public(job))

    def _get(self, job_id: str) -> Reply:
        job = self.jobs[job_id]
        if job["processing_status"] != "ended":
            job["_polls"] += 1
            if job["_polls"] >= self.steps:
                self._finish(job_id, canceled=False)
        return Reply(200, json=_public(job))

    def _finish(self, job_id: str, *, canceled: bool) -> None:
        job = self.jobs[job_id]
        reqs = self.requests[job_id]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        rows: list[bytes] = []
        limit = len(reqs) if self.expire_after is None else self.expire_after
        if canceled:
            limit = len(reqs) // 2
        for n, req in enumerate(reqs):
            cid = req["custom_id"]
            if cid == self.drop_custom_id:
                continue
            if n >= limit:
                kind = "canceled" if canceled else "expired"
                result: dict[str, Any] = {"type": kind}
            else:
                answer = self.answer(req["params"])
                if isinstance(answer, Exception):
                    kind = "errored"
                    result = {
                        "type": "errored",
                        "error": {"type": "error", "error": {"type": "invalid_request_error", "message": str(answer)}},
                    }
                else:
                    kind = "succeeded"
                    result = {"type": "succeeded", "message": answer}
            counts[kind] += 1
            rows.append(json.dumps({"custom_id": cid, "result": result}).encode())
        if self.extra_custom_id is not None:
            rows.append(json.dumps({"custom_id": self.extra_custom_id, "result": {"type": "canceled"}}).encode())
        results_path = f"/v1/messages/batches/{job_id}/results"
        self.server.set_default(results_path, Reply(200, body=b"\n".join(rows) + b"\n"))
        job["processing_status"] = "ended"
        job["request_counts"] = counts
        if self.report_total is not None:
            job["request_counts"] = {**dict.fromkeys(counts, 0), "succeeded": self.report_total}
        job["results_url"] = self.server.url + results_path

    def _cancel(self, job_id: str) -> Reply:
        self.canceled.append(job_id)
        job = self.jobs[job_id]
        job["processing_status"] = "canceling"
        self._finish(job_id, canceled=True)
        return Reply(200, json=_public(job))

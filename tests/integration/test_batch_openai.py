"""OpenAIBatch against a loopback fake of the OpenAI Files + Batches endpoints."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.advisor import BaseAdvisor
from chatclient.batch import OpenAIBatch
from chatclient.errors import BatchError, BatchItemError, BatchTimeoutError, OutputConversionError
from chatclient.models.base import Usage
from chatclient.models.openai import OpenAIChatModel
from chatclient.request import ChatClientRequest
from tests.support import LoopbackServer, server_fixtures
from tests.support.batch_fakes import FakeOpenAIBatches
from tests.support.loopback import Reply, openai_completion

pytestmark = pytest.mark.integration

loopback_server, server = server_fixtures()
KEY = "sk-batch-test-key-0123456789"


class City(BaseModel):
    name: str
    population: int


class Shout(BaseAdvisor):
    """A `before` that changes the request: the batch line must carry its effect."""

    order = 0

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        return request.mutate(prompt=request.prompt.augment_user_message(request.prompt.user_message.text.upper()))


def model(srv: LoopbackServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", api_key=KEY, base_url=srv.url + "/v1", timeout=10.0, backoff_base=0.001)


def client(srv: LoopbackServer) -> ChatClient:
    return ChatClient.builder(model(srv)).default_system("Be brief.").default_advisors(Shout()).build()


def test_line_body_is_the_synchronous_body(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("hello"), c.prompt("world")])
    (job_id,) = job.parts
    lines = fake.input_lines(job_id)
    assert [line["custom_id"] for line in lines] == ["item-0", "item-1"]
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
    # the same request made synchronously sends exactly these bytes
    server.script("/v1/chat/completions", Reply(json=openai_completion("hi")))
    c.prompt("hello").call().content()
    sent = server.requests_to("/v1/chat/completions")[-1].raw
    raw_line = fake.files[fake.jobs[job_id]["input_file_id"]].split(b"\n")[0]
    assert raw_line.endswith(b',"body":' + sent + b"}")
    assert json.loads(sent)["messages"][-1]["content"] == "HELLO"  # the advisor's before ran
    upload = server.requests_to("/v1/files")[0]
    assert upload.headers["authorization"] == f"Bearer {KEY}"


def test_results_in_order_with_usage(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(5)])
    results = job.wait(poll_interval=0.01, progress=False).results()
    assert [r.index for r in results] == list(range(5))
    assert [r.value.text for r in results] == [f"echo Q{i}" for i in range(5)]  # type: ignore[union-attr]
    assert all(r.usage == Usage(5, 2, reported_total_tokens=7) or r.usage.total_tokens == 7 for r in results)  # type: ignore[union-attr]
    assert job.status() == "completed"


def test_entity_response_format_and_conversion(server: LoopbackServer) -> None:
    def answer(body: dict[str, Any]) -> Any:
        text = body["messages"][-1]["content"]
        if "BAD" in text:
            return openai_completion("not json at all")
        return openai_completion(json.dumps({"name": text, "population": 3}))

    fake = FakeOpenAIBatches(server, answer=answer)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("oslo"), c.prompt("bad"), c.prompt("rome")], entity=City)
    body = fake.input_lines(job.parts[0])[0]["body"]
    assert body["response_format"]["type"] == "json_schema"
    results = job.wait(poll_interval=0.01, progress=False).results()
    assert results[0].value == City(name="OSLO", population=3)
    assert results[2].value == City(name="ROME", population=3)
    assert isinstance(results[1].error, OutputConversionError) and results[1].value is None


def test_item_errors_are_kept(server: LoopbackServer) -> None:
    def answer(body: dict[str, Any]) -> Any:
        return ValueError("context too long") if "TWO" in body["messages"][-1]["content"] else openai_completion("ok")

    FakeOpenAIBatches(server, answer=answer)
    c = client(server)
    results = (
        OpenAIBatch(model(server))
        .submit([c.prompt(x) for x in ("one", "two", "three")])
        .wait(poll_interval=0.01, progress=False)
        .results()
    )
    assert [r.ok for r in results] == [True, False, True]
    assert "context too long" in str(results[1].error)


def test_expired_job_returns_finished_items(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server, expire_after=2)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(4)])
    results = job.wait(poll_interval=0.01, progress=False).results()
    assert job.status() == "expired"
    assert [r.ok for r in results] == [True, True, False, False]
    assert all(isinstance(r.error, BatchItemError) and r.error.kind == "expired" for r in results[2:])


def test_rejected_file_names_line_and_item(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server, reject_line=2)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(3)])
    with pytest.raises(BatchError, match=r"line 2 \(item 1, custom_id item-1\)"):
        job.wait(poll_interval=0.01, progress=False)


def test_unknown_custom_id_is_an_error(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server, extra_custom_id="item-1")
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("a")]).wait(poll_interval=0.01, progress=False)
    with pytest.raises(BatchItemError, match="item-1") as info:
        job.results()
    assert info.value.kind == "unknown" and info.value.custom_id == "item-1"


@pytest.mark.parametrize("reported", [1, 5])
def test_results_are_the_submitted_items_whatever_the_counts_say(server: LoopbackServer, reported: int) -> None:
    FakeOpenAIBatches(server, report_total=reported)  # the job's status says 1 (or 5) requests, 2 were sent
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("a"), c.prompt("b")])
    assert job.id == f"{job.parts[0]}:2"
    for again in (job.wait(poll_interval=0.01, progress=False), OpenAIBatch(model(server)).attach(job.id)):
        results = again.results()
        assert [r.value.text for r in results] == ["echo A", "echo B"]  # type: ignore[union-attr]


def test_a_submitted_item_missing_from_the_results_is_named(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server, drop_custom_id="item-1")
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt(x) for x in "abc"]).wait(poll_interval=0.01, progress=False)
    results = job.results()
    assert [r.ok for r in results] == [True, False, True]
    assert isinstance(results[1].error, BatchItemError) and results[1].error.custom_id == "item-1"
    assert "item-1" in str(results[1].error)


def test_attach_refuses_a_malformed_id(server: LoopbackServer) -> None:
    with pytest.raises(ValueError, match="not a job id"):
        OpenAIBatch(model(server)).attach("batch_1:lots")


def test_split_by_limits_and_attach_from_elsewhere(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server)
    c = client(server)
    job = OpenAIBatch(model(server), max_lines=2).submit([c.prompt(f"q{i}") for i in range(5)])
    assert len(job.parts) == 3 and len(fake.jobs) == 3
    assert job.id == ",".join(f"{p}:{n}" for p, n in zip(job.parts, (2, 2, 1), strict=True))
    # another process: only the id and an equal model
    again = pickle.loads(pickle.dumps(OpenAIBatch(model(server)))).attach(job.id)
    results = again.wait(poll_interval=0.01, progress=False).results()
    assert [r.value.text for r in results] == [f"echo Q{i}" for i in range(5)]  # type: ignore[union-attr]
    # bytes split too
    small = OpenAIBatch(model(server), max_bytes=600).submit([c.prompt("x" * 100) for _ in range(4)])
    assert len(small.parts) >= 2


def test_wait_timeout_and_cancel(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server, steps=10_000)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(4)])
    with pytest.raises(BatchTimeoutError) as info:
        job.wait(poll_interval=0.01, timeout=0.05, progress=False)
    assert info.value.job_id == job.id
    job.cancel()
    assert fake.canceled == job.parts
    results = job.results()
    assert [r.ok for r in results] == [True, True, False, False]
    assert results[3].error.kind == "canceled"  # type: ignore[union-attr]


def test_wait_progress_lines_on_stderr(server: LoopbackServer, capsys: pytest.CaptureFixture[str]) -> None:
    FakeOpenAIBatches(server)
    c = client(server)
    OpenAIBatch(model(server)).submit([c.prompt("a"), c.prompt("b")]).wait(poll_interval=0.01)
    err = capsys.readouterr().err
    assert "2/2" in err and "\r" not in err


def test_bad_arguments(server: LoopbackServer) -> None:
    from chatclient.testing import ScriptedChatModel

    with pytest.raises(TypeError, match="OpenAIChatModel"):
        OpenAIBatch(ScriptedChatModel())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="request specs"):
        OpenAIBatch(model(server)).submit(["hello"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        OpenAIBatch(model(server)).submit([])
    with pytest.raises(ValueError, match="attach"):
        OpenAIBatch(model(server)).attach("")


def test_http_failure_is_typed_and_never_shows_the_key(server: LoopbackServer) -> None:
    server.script("/v1/files", Reply(401, json={"error": {"message": f"bad key {KEY}", "type": "auth"}}))
    c = client(server)
    from chatclient.errors import AuthenticationError

    with pytest.raises(AuthenticationError) as info:
        OpenAIBatch(model(server)).submit([c.prompt("a")])
    assert KEY not in str(info.value)


def test_upload_is_retried_after_a_503_with_the_same_bytes(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server)
    server.script("/v1/files", Reply(503, json={"error": {"message": "busy", "type": "server_error"}}))
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("a")])
    first, second = server.requests_to("/v1/files")
    assert first.raw == second.raw and first.headers["content-type"] == second.headers["content-type"]
    assert first.headers["content-type"].startswith("multipart/form-data; boundary=")
    (job_id,) = job.parts
    assert [line["custom_id"] for line in fake.input_lines(job_id)] == ["item-0"]


def test_results_files_are_bounded_and_must_be_json(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server)
    c = client(server)
    job = OpenAIBatch(model(server), max_download_bytes=200).submit([c.prompt("a"), c.prompt("b")])
    job.wait(poll_interval=0.01, progress=False)
    with pytest.raises(BatchError, match="larger than 200 bytes"):
        job.results()
    # a torn or foreign results file names the line
    out_id = fake.jobs[job.parts[0]]["output_file_id"]
    server.set_default(f"/v1/files/{out_id}/content", Reply(200, body=b'{"custom_id": "item-0"}\nnot json\n'))
    with pytest.raises(BatchError, match="line 2"):
        OpenAIBatch(model(server)).attach(job.id).results()


def test_a_deeply_nested_results_line_is_a_batch_error(server: LoopbackServer) -> None:
    fake = FakeOpenAIBatches(server)
    c = client(server)
    job = OpenAIBatch(model(server)).submit([c.prompt("a")]).wait(poll_interval=0.01, progress=False)
    out_id = fake.jobs[job.parts[0]]["output_file_id"]
    nested = b'{"custom_id": "item-0", "response": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
    server.set_default(f"/v1/files/{out_id}/content", Reply(200, body=nested))
    with pytest.raises(BatchError, match="line 1"):
        job.results()


def test_ctrl_c_in_wait_says_how_to_resume(server: LoopbackServer, capsys: pytest.CaptureFixture[str]) -> None:
    import _thread
    import threading

    FakeOpenAIBatches(server, steps=10_000)
    job = OpenAIBatch(model(server)).submit([client(server).prompt("a")])
    timer = threading.Timer(0.2, _thread.interrupt_main)  # what Ctrl-C does to the main thread
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        job.wait(poll_interval=0.01, progress=False)
    timer.join()
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "interrupted" in x]
    assert f"job {job.id!r} keeps running" in line and f"attach({job.id!r}).wait()" in line


def test_a_job_pickled_before_item_counts_still_loads(server: LoopbackServer) -> None:
    FakeOpenAIBatches(server)
    job = OpenAIBatch(model(server)).submit([client(server).prompt("a")])
    old = pickle.loads(pickle.dumps(job))
    del old.__dict__["sizes"]  # what an older BatchJob held
    again = pickle.loads(pickle.dumps(old))
    assert again.sizes == [None] and again.id == job.parts[0]
    assert [r.ok for r in again.wait(poll_interval=0.01, progress=False).results()] == [True]

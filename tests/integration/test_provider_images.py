"""OpenAIImageModel and AzureOpenAIImageModel over real HTTP against a loopback server that answers
with OpenAI's documented example responses (tests/data/openai_media)."""

from __future__ import annotations

import asyncio
import base64
import pickle
from pathlib import Path

import pytest

from advisors import Budget
from chatclient.errors import AuthenticationError, BudgetExceededError, RateLimitError, RefusalError
from chatclient.messages import Media
from chatclient.models.images import AzureOpenAIImageModel, ImageModel, ImageResponse, OpenAIImageModel
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.media import documented, fields, form_parts, png

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-images-SECRET-0123456789abcdef"
GENERATIONS = "/v1/images/generations"
EDITS = "/v1/images/edits"
DOC_PNG = base64.b64decode(documented("images_generations_gpt_image_1")["data"][0]["b64_json"])


def model(server: LoopbackServer, name: str = "gpt-image-1", **kw: object) -> OpenAIImageModel:
    return OpenAIImageModel(name, api_key=KEY, base_url=server.url + "/v1", **kw)  # type: ignore[arg-type]


# -- generations -----------------------------------------------------------------------------------------


def test_generate_sends_each_field_and_reads_the_documented_answer(server: LoopbackServer, tmp_path: Path) -> None:
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_gpt_image_1")))
    with model(server) as images:
        assert isinstance(images, ImageModel)
        response = images.generate(
            "A watercolour fox", size="1024x1024", quality="low", output_format="png", background="transparent"
        )
    (rec,) = server.requests_to(GENERATIONS)
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    assert rec.headers["content-type"] == "application/json"
    assert rec.body == {
        "prompt": "A watercolour fox",
        "model": "gpt-image-1",
        "n": 1,
        "size": "1024x1024",
        "quality": "low",
        "output_format": "png",
        "background": "transparent",
    }
    assert isinstance(response, ImageResponse)
    (image,) = response.images
    assert image.data == DOC_PNG and image.url is None and image.mime_type == "image/png"
    assert response.usage.prompt_tokens == 50 and response.usage.completion_tokens == 50
    assert response.usage.total_tokens == 100
    assert response.metadata["created"] == 1713833628
    assert image.to_media() == Media("image/png", DOC_PNG)
    saved = image.save(tmp_path / "fox.png")
    assert saved.read_bytes() == DOC_PNG


def test_dalle3_url_answers_keep_the_revised_prompt(server: LoopbackServer, tmp_path: Path) -> None:
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_dall_e_3_url")))
    with model(server, "dall-e-3") as images:
        response = asyncio.run(
            images.agenerate("a baby sea otter", size="1792x1024", quality="hd", style="natural", response_format="url")
        )
    assert server.requests_to(GENERATIONS)[0].body == {
        "prompt": "a baby sea otter",
        "model": "dall-e-3",
        "n": 1,
        "size": "1792x1024",
        "quality": "hd",
        "style": "natural",
        "response_format": "url",
    }
    image = response.image
    assert image.url == "https://images.example.com/img-1.png" and image.data is None
    assert image.revised_prompt is not None and image.revised_prompt.startswith("A cute baby sea otter")
    assert image.to_media() == Media("image/png", "https://images.example.com/img-1.png")
    with pytest.raises(ValueError, match="b64_json"):
        image.save(tmp_path / "otter.png")
    assert response.usage.is_empty()


def test_several_images_and_other_formats(server: LoopbackServer) -> None:
    webp = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8
    payload = {"created": 1, "output_format": "webp", "data": [{"b64_json": base64.b64encode(webp).decode()}] * 3}
    server.set_default(GENERATIONS, Reply(json=payload))
    with model(server) as images:
        response = images.generate("three", n=3, output_format="webp")
    assert server.requests_to(GENERATIONS)[0].body["n"] == 3
    assert [i.mime_type for i in response.images] == ["image/webp"] * 3
    assert response.metadata["output_format"] == "webp"


# -- edits ------------------------------------------------------------------------------------------------


def test_edit_uploads_images_and_mask_as_multipart_parts(server: LoopbackServer, tmp_path: Path) -> None:
    server.set_default(EDITS, Reply(json=documented("images_edits_gpt_image_1")))
    first, second, mask = png(2, 2), png(3, 3, (0, 255, 0, 255)), png(2, 2, (0, 0, 0, 0))
    (tmp_path / "second.png").write_bytes(second)
    with model(server) as images:
        response = images.edit(
            "Put them in a gift basket",
            [Media("image/png", first), tmp_path / "second.png"],
            mask=mask,
            size="1024x1536",
            quality="high",
            input_fidelity="high",
        )
    assert response.image.data == DOC_PNG
    (rec,) = server.requests_to(EDITS)
    parts = form_parts(rec)
    assert fields(parts) == {
        "prompt": ["Put them in a gift basket"],
        "model": ["gpt-image-1"],
        "n": ["1"],
        "size": ["1024x1536"],
        "quality": ["high"],
        "input_fidelity": ["high"],
    }
    files = [p for p in parts if p.filename is not None]
    assert [(p.name, p.content_type, p.data) for p in files] == [
        ("image[]", "image/png", first),
        ("image[]", "image/png", second),
        ("mask", "image/png", mask),
    ]
    assert files[1].filename == "second.png"


def test_one_image_is_sent_as_image_and_async_edit_works(server: LoopbackServer) -> None:
    server.set_default(EDITS, Reply(json=documented("images_edits_gpt_image_1")))
    with model(server) as images:
        response = asyncio.run(images.aedit("brighter", png(), n=2))
    parts = form_parts(server.requests_to(EDITS)[0])
    assert [p.name for p in parts if p.filename] == ["image"]
    assert fields(parts)["n"] == ["2"]
    assert len(response.images) == 1


def test_a_retried_upload_sends_the_same_bytes(server: LoopbackServer) -> None:
    server.script(EDITS, Reply(500, headers={"retry-after": "0"}), Reply(json=documented("images_edits_gpt_image_1")))
    with model(server) as images:
        images.edit("again", png())
    first, second = server.requests_to(EDITS)
    assert first.raw == second.raw and first.headers["content-type"] == second.headers["content-type"]


# -- failures -----------------------------------------------------------------------------------------------


def test_429_and_500_are_retried(server: LoopbackServer) -> None:
    ok = documented("images_generations_gpt_image_1")
    server.script(
        GENERATIONS,
        Reply(429, json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, headers={"retry-after": "0"}),
        Reply(500, headers={"retry-after": "0"}),
        Reply(json=ok),
    )
    with model(server) as images:
        assert images.generate("x").image.data == DOC_PNG
    assert len(server.requests_to(GENERATIONS)) == 3


def test_retries_end_with_the_typed_error(server: LoopbackServer) -> None:
    server.set_default(GENERATIONS, Reply(429, json={"error": {"message": f"no {KEY}"}}, headers={"retry-after": "0"}))
    with model(server, max_retries=1) as images, pytest.raises(RateLimitError) as info:
        images.generate("x")
    assert len(server.requests_to(GENERATIONS)) == 2
    assert KEY not in str(info.value) and KEY not in repr(info.value) and KEY not in (info.value.body or "")


@pytest.mark.parametrize("name", ["error_content_policy_violation", "error_moderation_blocked"])
def test_content_policy_rejections_are_refusals(server: LoopbackServer, name: str) -> None:
    server.set_default(GENERATIONS, Reply(400, json=documented(name)))
    with model(server) as images, pytest.raises(RefusalError) as info:
        images.generate("something disallowed")
    assert "rejected" in info.value.refusal and "safety system" in str(info.value)
    assert len(server.requests_to(GENERATIONS)) == 1  # a refusal is not retried


def test_auth_failure_is_typed_and_the_key_appears_nowhere(server: LoopbackServer) -> None:
    server.set_default(GENERATIONS, Reply(401, json={"error": {"message": f"Incorrect API key: {KEY}"}}))
    images = model(server)
    with images, pytest.raises(AuthenticationError) as info:
        images.generate("x")
    for text in (str(info.value), repr(info.value), info.value.body or "", repr(images), repr(vars(images))):
        assert KEY not in text and KEY[8:20] not in text


def test_malformed_answers_are_response_errors(server: LoopbackServer) -> None:
    from chatclient.errors import ModelResponseError

    payloads: list[object] = [{"data": []}, {"data": [{"b64_json": "@@@"}]}, {"data": [{"url": "ftp://x"}]}, [1]]
    for payload in payloads:
        server.set_default(GENERATIONS, Reply(json=payload))
        with model(server) as images, pytest.raises(ModelResponseError):
            images.generate("x")


# -- inputs checked before HTTP -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("gpt-image-1", {"prompt": ""}, "prompt is empty"),
        ("gpt-image-1", {"prompt": "   "}, "prompt is empty"),
        ("gpt-image-1", {"prompt": "x", "n": 0}, "n .* >= 1"),
        ("gpt-image-1", {"prompt": "x", "n": 11}, "at most 10"),
        ("dall-e-3", {"prompt": "x", "n": 2}, "at most 1"),
        ("gpt-image-1", {"prompt": "x", "style": "vivid"}, "no style"),
        ("dall-e-3", {"prompt": "x", "output_format": "webp"}, "no output_format"),
        ("dall-e-2", {"prompt": "x", "background": "transparent"}, "no background"),
        ("gpt-image-1", {"prompt": "x", "response_format": "url"}, "base64"),
    ],
)
def test_bad_generation_inputs_fail_before_http(
    server: LoopbackServer, name: str, kwargs: dict[str, object], message: str
) -> None:
    with model(server, name) as images, pytest.raises(ValueError, match=message):
        images.generate(**kwargs)  # type: ignore[arg-type]
    assert server.requests_to(GENERATIONS) == []


def test_unknown_sizes_and_qualities_pass_through(server: LoopbackServer) -> None:
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_gpt_image_1")))
    with model(server) as images:
        images.generate("x", size="1536x864", quality="xhigh", output_format="gif")
    body = server.requests_to(GENERATIONS)[0].body
    assert (body["size"], body["quality"], body["output_format"]) == ("1536x864", "xhigh", "gif")


def test_bad_edit_inputs_fail_before_http(server: LoopbackServer, tmp_path: Path) -> None:
    with model(server, "dall-e-2") as images:
        with pytest.raises(ValueError, match=r"dall-e-2 image edits takes at most 4 MB \(4,194,304 bytes\)"):
            images.edit("x", b"\x89PNG\r\n\x1a\n" + b"\x00" * (4 * 1024 * 1024))
        with pytest.raises(ValueError, match="at least one image"):
            images.edit("x", [])
        with pytest.raises(ValueError, match="does not exist"):
            images.edit("x", tmp_path / "missing.png")
        with pytest.raises(ValueError, match="format"):
            images.edit("x", b"not an image")
        with pytest.raises(ValueError, match="URL"):
            images.edit("x", Media.from_url("https://example.com/a.png"))
        with pytest.raises(ValueError, match="prompt is empty"):
            images.edit("", png())
    assert server.requests_to(EDITS) == []


# -- budgets, pickling, compatible servers ---------------------------------------------------------


def test_budget_is_charged_per_image_and_refuses_before_http(server: LoopbackServer) -> None:
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_gpt_image_1")))
    budget = Budget(max_cost=0.03, period=None)
    with model(server, budget=budget, budget_key="team") as images:
        first = images.generate("x", quality="low", size="1024x1024")
        assert first.metadata["cost"] == pytest.approx(0.011)
        images.generate("x", quality="low", size="1024x1024")
        with pytest.raises(BudgetExceededError):
            images.generate("x", quality="low", size="1024x1024")
    assert budget.spent("team").cost == pytest.approx(0.022)
    assert budget.spent("team").calls == 2
    assert len(server.requests_to(GENERATIONS)) == 2


def test_a_budget_without_a_price_refuses_to_guess(server: LoopbackServer) -> None:
    with model(server, "my-diffusion", budget=Budget(max_cost=1.0)) as images, pytest.raises(BudgetExceededError):
        images.generate("x")
    assert server.requests_to(GENERATIONS) == []


def test_pickles_as_its_arguments_and_keeps_working(server: LoopbackServer) -> None:
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_gpt_image_1")))
    images = model(server)
    copy = pickle.loads(pickle.dumps(images))
    assert copy == images and repr(copy) == repr(images)
    with copy:
        assert copy.generate("x").image.data == DOC_PNG
    images.close()


def test_an_openai_compatible_server_needs_no_key(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.set_default(GENERATIONS, Reply(json=documented("images_generations_gpt_image_1")))
    with OpenAIImageModel("sdxl-turbo", base_url=server.url + "/v1") as images:
        images.generate("x", size="512x512", steps=4)
    rec = server.requests_to(GENERATIONS)[0]
    assert "authorization" not in rec.headers
    assert rec.body == {"prompt": "x", "model": "sdxl-turbo", "n": 1, "size": "512x512", "steps": 4}


# -- Azure ----------------------------------------------------------------------------------------------


def test_azure_deployment_path_api_key_and_deployment_as_model(server: LoopbackServer) -> None:
    path = "/openai/deployments/painter/images/generations?api-version=2025-04-01-preview"
    server.set_default(path, Reply(json=documented("images_generations_gpt_image_1")))
    with AzureOpenAIImageModel(
        "painter", endpoint=server.url, api_key=KEY, api_version="2025-04-01-preview"
    ) as images:
        images.generate("x", quality="medium")
    rec = server.requests_to(path)[0]
    assert rec.headers["api-key"] == KEY and "authorization" not in rec.headers
    assert rec.body == {"prompt": "x", "model": "painter", "n": 1, "quality": "medium"}


def test_azure_token_provider_is_asked_per_request_and_again_after_a_401(server: LoopbackServer) -> None:
    tokens = iter(["tok-expired-0001", "tok-fresh-0002", "tok-fresh-0003"])
    path = "/openai/v1/images/edits"
    server.script(path, Reply(401, json={"error": {"message": "expired"}}))
    server.set_default(path, Reply(json=documented("images_edits_gpt_image_1")))
    with AzureOpenAIImageModel("painter", endpoint=server.url, token_provider=lambda: next(tokens)) as images:
        images.edit("x", png())
        images.edit("y", png())
    seen = [r.headers["authorization"] for r in server.requests_to(path)]
    assert seen == ["Bearer tok-expired-0001", "Bearer tok-fresh-0002", "Bearer tok-fresh-0003"]
    assert fields(form_parts(server.requests_to(path)[0]))["model"] == ["painter"]


def test_azure_content_filter_is_a_refusal_naming_the_category(server: LoopbackServer) -> None:
    path = "/openai/v1/images/generations"
    server.set_default(path, Reply(400, json=documented("error_azure_content_filter")))
    images = AzureOpenAIImageModel("painter", endpoint=server.url, api_key=KEY)
    with images, pytest.raises(RefusalError, match=r"violence \(high\)"):
        images.generate("x")


def test_a_404_at_a_root_without_v1_says_where_the_api_lives(server: LoopbackServer) -> None:
    from chatclient.errors import ModelHTTPError

    server.set_default("/images/generations", Reply(404, json={"error": {"message": "Not Found"}}))
    images = OpenAIImageModel(api_key=KEY, base_url=server.url)
    with images, pytest.raises(ModelHTTPError, match=r"serve /v1/images/generations: try base_url='http://127\.0\.0\.1:\d+/v1'"):
        images.generate("x")

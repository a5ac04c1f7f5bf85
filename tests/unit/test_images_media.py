"""The pure parts of the image models: answers parsed, values checked, prices, multipart bodies."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import pickle

import pytest

from chatclient.errors import ModelResponseError
from chatclient.messages import Media
from chatclient.models.http.multipart import EncodedBody, FilePart, multipart_body
from chatclient.models.images import GeneratedImage, ImageResponse, OpenAIImageModel, parse_images
from chatclient.models.media_prices import DEFAULT_MEDIA_PRICES, MEDIA_PRICES_DATE, MediaPrice, MediaPriceTable
from chatclient.models.openai_media import sniff_mime
from chatclient.resilience.prices import DEFAULT_MEDIA_PRICES as REEXPORTED
from tests.support.media import documented, png

# -- answers ----------------------------------------------------------------------------------------------


def test_parse_images_reads_the_documented_answers() -> None:
    gpt = parse_images(documented("images_generations_gpt_image_1"))
    assert gpt.image.data is not None and gpt.image.data.startswith(b"\x89PNG")
    assert gpt.usage.total_tokens == 100
    dalle = parse_images(documented("images_generations_dall_e_3_url"))
    assert dalle.image.url is not None and dalle.image.revised_prompt is not None
    assert dalle.usage.is_empty() and dalle.metadata == {"created": 1589478378}


def test_parse_images_bounds_and_types_what_it_reads() -> None:
    one = {"b64_json": base64.b64encode(png()).decode()}
    assert len(parse_images({"data": [one] * 40}).images) == 16
    bad_answers: list[object] = [None, {}, {"data": "x"}, {"data": []}, {"data": [1]}, {"data": [{"b64_json": "!"}]}]
    for bad in bad_answers:
        with pytest.raises(ModelResponseError):
            parse_images(bad)
    usage = parse_images({"data": [one], "usage": {"input_tokens": -3, "output_tokens": True}}).usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


def test_mime_type_comes_from_the_format_or_the_bytes() -> None:
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 8
    payload = {"data": [{"b64_json": base64.b64encode(jpeg).decode()}]}
    assert parse_images(payload).image.mime_type == "image/jpeg"
    assert parse_images(payload, "webp").image.mime_type == "image/webp"
    assert parse_images({**payload, "output_format": "png"}).image.mime_type == "image/png"


def test_generated_image_values() -> None:
    with pytest.raises(ValueError, match="data or a url"):
        GeneratedImage()
    image = GeneratedImage(b"x" * 5000)
    assert repr(image) == "GeneratedImage(5000 bytes, mime_type='image/png')"
    assert image.to_media() == Media("image/png", b"x" * 5000)
    with pytest.raises(ValueError, match="no images"):
        _ = ImageResponse([]).image
    response = ImageResponse([image], metadata={"cost": 0.1})
    with pytest.raises(TypeError):
        response.metadata["cost"] = 0.2  # type: ignore[index]


# -- request checks (pure: nothing is sent) ---------------------------------------------------------------


def test_newer_gpt_image_models_share_the_rules_and_compatible_models_pass() -> None:
    model = OpenAIImageModel("gpt-image-1.5", api_key="sk-test-0123")
    with pytest.raises(ValueError, match="no style"):
        model._generation("x", 1, None, None, "vivid", None, {})
    other = OpenAIImageModel("flux-schnell", base_url="http://127.0.0.1:9/v1")
    body = other._generation("x", 4, "512x512", None, "photo", "webp", {"steps": 4, "seed": None})
    assert body == {"prompt": "x", "model": "flux-schnell", "n": 4, "size": "512x512", "style": "photo",
                    "output_format": "webp", "steps": 4}  # fmt: skip
    with pytest.raises(TypeError, match="str"):
        other._generation(b"x", 1, None, None, None, None, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n"):
        other._generation("x", True, None, None, None, None, {})


# -- prices ------------------------------------------------------------------------------------------------


def test_image_prices_by_quality_and_size_plan_for_the_dearest_unknown() -> None:
    price = DEFAULT_MEDIA_PRICES.find("gpt-image-1")
    assert price is not None
    assert price.image("low", "1024x1024") == 0.011
    assert price.image("HIGH", "1536x1024") == 0.25
    assert price.image(None, "1024x1024") == 0.167  # quality left to the server: the dearest
    assert price.image("auto", "auto") == 0.25
    assert price.image("ultra", None) is None
    assert DEFAULT_MEDIA_PRICES.find("dall-e-3-2024") == DEFAULT_MEDIA_PRICES.find("dall-e-3")
    assert DEFAULT_MEDIA_PRICES.find("tts-1-hd") == MediaPrice(per_million_characters=30.0)
    assert DEFAULT_MEDIA_PRICES.find("unknown") is None and DEFAULT_MEDIA_PRICES.find(None) is None
    assert DEFAULT_MEDIA_PRICES.date == MEDIA_PRICES_DATE and REEXPORTED is DEFAULT_MEDIA_PRICES


def test_price_values_are_checked() -> None:
    with pytest.raises(ValueError, match="quality:size"):
        MediaPrice(per_image={"1024x1024": 0.1})
    with pytest.raises(ValueError, match=">= 0"):
        MediaPrice(per_audio_minute=-1)
    with pytest.raises(ValueError, match=">= 0"):
        MediaPrice(per_image={"low:1x1": True})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="MediaPrice"):
        MediaPriceTable({"x": 0.1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="model names"):
        MediaPriceTable({"": MediaPrice()})
    table = DEFAULT_MEDIA_PRICES.with_prices({"My-TTS": MediaPrice(per_million_characters=1.0)})
    assert table.find("my-tts-v2") == MediaPrice(per_million_characters=1.0)
    assert pickle.loads(pickle.dumps(table)).find("gpt-image-1") == table.find("gpt-image-1")


def test_model_budget_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="budget"):
        OpenAIImageModel(api_key="sk-test-0123", budget=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MediaPriceTable"):
        OpenAIImageModel(api_key="sk-test-0123", prices={"x": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        OpenAIImageModel("  ", api_key="sk-test-0123")


# -- multipart ---------------------------------------------------------------------------------------------


def parse(body: EncodedBody) -> list[tuple[str, str | None, bytes]]:
    head = f"Content-Type: {body.content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body.content)
    out = []
    for part in message.iter_parts():
        filename = part.get_param("filename", header="content-disposition")
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        name = part.get_param("name", header="content-disposition")
        out.append((str(name), filename if isinstance(filename, str) else None, payload))
    return out


def test_multipart_bodies_parse_back() -> None:
    data = png() + b"\r\n--not-a-boundary\r\n"
    fields = {"prompt": 'say "hi"\nplease', "tags[]": ["a", "b"]}
    body = multipart_body(fields, [FilePart("image", "a.png", "image/png", data)])
    again = multipart_body(fields, [FilePart("image", "a.png", "image/png", data)])
    assert body.content_type != again.content_type  # a fresh random boundary each time
    assert parse(body) == parse(again) == [
        ("prompt", None, b'say "hi"\nplease'),
        ("tags[]", None, b"a"),
        ("tags[]", None, b"b"),
        ("image", "a.png", data),
    ]
    assert "bytes" in repr(body) and len(repr(body)) < 120


def test_multipart_refuses_a_content_type_that_would_break_the_part() -> None:
    with pytest.raises(ValueError, match="line breaks"):
        multipart_body({}, [FilePart("f", "a", "image/png\r\nX-Evil: 1", b"x")])


def test_sniffing_common_formats() -> None:
    assert sniff_mime(png()) == "image/png"
    assert sniff_mime(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_mime(b"RIFF\x00\x00\x00\x00WAVEfmt ") == "audio/wav"
    assert sniff_mime(b"\x00\x00\x00\x18ftypM4A ") == "audio/mp4"
    assert sniff_mime(b"ID3\x04") == "audio/mpeg"
    assert sniff_mime(b"plain text") is None

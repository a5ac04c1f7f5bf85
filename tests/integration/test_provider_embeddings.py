"""OpenAIEmbeddingModel and OllamaEmbeddingModel over real HTTP: batching, order, shapes, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from chatclient.errors import AuthenticationError, ModelResponseError
from chatclient.models.ollama import OllamaEmbeddingModel
from chatclient.models.openai import OpenAIEmbeddingModel
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Recorded, Reply

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-embed-SECRET-0123456789"


def vector(text: str) -> list[float]:
    """A deterministic 3-d vector per text, so rows can be checked against their inputs."""
    return [float(len(text)), float(sum(map(ord, text)) % 97), 1.0]


def openai_embeddings(rec: Recorded) -> Reply:
    inputs = rec.body["input"]
    # Answer out of order: the client must sort by "index".
    data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(inputs)][::-1]
    return Reply(json={"object": "list", "data": data, "model": rec.body["model"], "usage": {"prompt_tokens": 1}})


def ollama_embeddings(rec: Recorded) -> Reply:
    return Reply(json={"model": rec.body["model"], "embeddings": [vector(t) for t in rec.body["input"]]})


TEXTS = [f"text number {i}" for i in range(7)]
EXPECTED = np.array([vector(t) for t in TEXTS])


def test_openai_batches_and_keeps_order(server: LoopbackServer) -> None:
    server.set_default("/v1/embeddings", openai_embeddings)
    with OpenAIEmbeddingModel("emb-test", api_key=KEY, base_url=server.url + "/v1", batch_size=3) as model:
        matrix = model.embed(TEXTS)
        amatrix = asyncio.run(model.aembed(TEXTS))
    assert matrix.shape == (7, 3) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix, EXPECTED)
    np.testing.assert_array_equal(amatrix, EXPECTED)
    requests = server.requests_to("/v1/embeddings")
    assert len(requests) == 6  # 3 + 3 + 1, twice
    assert requests[0].body == {"model": "emb-test", "input": TEXTS[:3], "encoding_format": "float"}
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert sorted(len(r.body["input"]) for r in requests) == [1, 1, 3, 3, 3, 3]
    assert model.dimensions == 3


def test_openai_dimensions_probe_and_request(server: LoopbackServer) -> None:
    server.set_default("/v1/embeddings", openai_embeddings)
    with OpenAIEmbeddingModel("custom", api_key=KEY, base_url=server.url + "/v1", dimensions=3) as model:
        assert model.dimensions == 3  # configured: no request needed
        assert server.requests_to("/v1/embeddings") == []
        model.embed(["a"])
    assert server.requests_to("/v1/embeddings")[0].body["dimensions"] == 3
    with OpenAIEmbeddingModel("unknown-model", api_key=KEY, base_url=server.url + "/v1") as model:
        assert model.dimensions == 3  # probed once
        assert model.embed([]).shape == (0, 3)


def test_openai_errors(server: LoopbackServer) -> None:
    server.script("/v1/embeddings", Reply(401, json={"error": {"message": f"bad key {KEY}"}}))
    server.script("/v1/embeddings", Reply(json={"data": [{"index": 0, "embedding": [1.0]}]}))
    with OpenAIEmbeddingModel("e", api_key=KEY, base_url=server.url + "/v1") as model:
        with pytest.raises(AuthenticationError) as info:
            model.embed(["a"])
        assert KEY not in str(info.value)
        with pytest.raises(ModelResponseError, match="expected 2 embeddings, got 1"):
            model.embed(["a", "b"])


def test_ollama_embed(server: LoopbackServer) -> None:
    server.set_default("/api/embed", ollama_embeddings)
    with OllamaEmbeddingModel("nomic", base_url=server.url, batch_size=4, truncate=True) as model:
        matrix = model.embed(TEXTS)
        amatrix = asyncio.run(model.aembed(TEXTS))
    np.testing.assert_array_equal(matrix, EXPECTED)
    np.testing.assert_array_equal(amatrix, EXPECTED)
    requests = server.requests_to("/api/embed")
    assert requests[0].body == {"model": "nomic", "input": TEXTS[:4], "truncate": True}
    assert len(requests) == 4


def test_single_string_is_rejected(server: LoopbackServer) -> None:
    model: Any = OpenAIEmbeddingModel("e", api_key=KEY, base_url=server.url)
    with pytest.raises(TypeError, match="sequence of texts"):
        model.embed("just one")

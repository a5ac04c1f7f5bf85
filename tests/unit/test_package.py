"""The package surface: what ``import chatclient`` loads and exposes."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_is_light() -> None:
    heavy = (
        "numpy",
        "jsonschema",
        "pydantic",
        "httpx",
        "asyncio",
        "jinja2",
        "opentelemetry",
        "chatclient.models.openai",
    )
    out = run(f"import sys, chatclient; print([m for m in {heavy!r} if m in sys.modules])")
    assert out == "[]"


def test_converters_are_importable_from_the_package_lazily() -> None:
    code = (
        "import sys, chatclient; assert 'pydantic' not in sys.modules; "
        "from chatclient import EntityOutputConverter, ListOutputConverter; "
        "print(EntityOutputConverter(int).convert('42'), ListOutputConverter().convert('a, b'))"
    )
    assert run(code) == "42 ['a', 'b']"


def test_unknown_attribute_is_an_attribute_error() -> None:
    assert run("import chatclient\ntry:\n    chatclient.Nope\nexcept AttributeError as e:\n    print('ok')") == "ok"

"""The HTTP machinery moved into chatclient.models.http; its earlier import paths still work."""

from __future__ import annotations

import importlib

import pytest

from chatclient.models._moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_earlier_path_gives_the_same_module(old: str, new: str) -> None:
    if old.endswith("aiohttp_transport"):
        pytest.importorskip("aiohttp", reason="the aiohttp extra is not installed")
    assert importlib.import_module(old) is importlib.import_module(new)


def test_names_import_from_the_earlier_paths() -> None:
    from chatclient.models.sse import SSEDecoder as Earlier
    from chatclient.models.stdlib_http import KEEPALIVE_EXPIRY

    from chatclient.models.http.sse import SSEDecoder

    assert Earlier is SSEDecoder and KEEPALIVE_EXPIRY > 0


def test_an_unknown_module_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("chatclient.models.no_such_module")

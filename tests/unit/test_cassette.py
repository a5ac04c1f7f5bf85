"""Cassette file handling without a server: unreadable files and replay-only rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatclient.errors import CassetteError
from chatclient.testing import Cassette


def test_unreadable_or_foreign_files_say_to_re_record(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(CassetteError, match="re-record"):
        Cassette(broken).load()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(CassetteError, match="not a cassette"):
        Cassette(foreign).load()


def test_replay_never_writes_and_record_starts_empty(tmp_path: Path) -> None:
    file = tmp_path / "c.json"
    payload = {"format": "chatclient-cassette/1", "interactions": [{"request": {"method": "POST", "path": "/x", "body": {}},
                                                                      "response": {"status": 200, "json": {}}}]}
    file.write_text(json.dumps(payload))
    before = file.read_text()
    with Cassette(file) as cassette:
        assert len(cassette.interactions) == 1
    assert file.read_text() == before
    with Cassette(file, mode="record") as cassette:
        assert cassette.interactions == []
    assert json.loads(file.read_text())["interactions"] == []  # a record run with no requests leaves an empty cassette
    with Cassette(tmp_path / "new.json", mode="new_episodes") as cassette:
        assert cassette.interactions == []  # a missing file is fine when new episodes may be recorded

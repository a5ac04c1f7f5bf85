"""chatclient.durable.dbos: a SIGKILLed run is recovered by a new process without repeating a completed step.

The application (``dbos_app.py``) runs as a real process against a loopback model server; the test
kills it with SIGKILL while the last model call is in flight, starts it again on the same DBOS
database (SQLite, then the machine's PostgreSQL) and checks what ran how often.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.loopback import LoopbackServer, Recorded, Reply, openai_completion

pytestmark = pytest.mark.integration

pytest.importorskip("dbos", reason="the dbos extra is not installed: pip install 'chatclient[dbos]'")

APP = Path(__file__).with_name("dbos_app.py")
ROOT = Path(__file__).resolve().parents[2]
PATH = "/v1/chat/completions"


class ModelServer:
    """Answers the workflow's three kinds of model call; the first final answer of 'write' hangs."""

    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.kinds: list[str] = []
        self.hung = threading.Event()
        self._lock = threading.Lock()
        server.set_default(PATH, self._answer)

    def _answer(self, rec: Recorded) -> Reply:
        messages = rec.body["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        if user.startswith("Outline"):
            kind, reply = "outline", Reply(json=openai_completion("1. why 2. how"))
        elif messages[-1]["role"] != "tool":
            kind = "write-asks-tool"
            reply = Reply(json=openai_completion(None, tool_calls=[("call_1", "stamp", '{"reviewer": "ada"}')]))
        else:
            kind = "write-final"
            reply = Reply(json=openai_completion("Report: durable agents work."))
        with self._lock:
            self.kinds.append(kind)
            first_final = kind == "write-final" and self.kinds.count(kind) == 1
        if first_final:
            self.hung.set()
            return Reply(json=openai_completion("never delivered"), delay=60.0)
        return reply

    def count(self, kind: str) -> int:
        with self._lock:
            return self.kinds.count(kind)


def start(db_url: str, model_url: str, workflow_id: str, effects: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), db_url, model_url, workflow_id, str(effects)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def crash_and_recover(db_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    workflow_id = f"report-{uuid.uuid4().hex[:8]}"
    with LoopbackServer() as server:
        model = ModelServer(server)
        first = start(db_url, server.url + "/v1", workflow_id, effects)
        try:
            assert model.hung.wait(timeout=120), "the run never reached the last model call"
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        assert effects.read_text().splitlines() == ["note 1. why 2. how", "approved stamp", "tool stamp ada"]

        second = start(db_url, server.url + "/v1", workflow_id, effects)
        out, err = second.communicate(timeout=180)
        assert second.returncode == 0, err[-3000:]
        line = next(x for x in out.splitlines() if x.startswith("OUTPUT "))
        assert json.loads(line[len("OUTPUT ") :]) == "Report: durable agents work."
        # completed steps answered from DBOS's record: neither the first model calls nor the
        # function agent nor the approval nor the tool ran again; only the call in flight was repeated
        assert model.count("outline") == 1 and model.count("write-asks-tool") == 1
        assert model.count("write-final") == 2
        assert effects.read_text().splitlines() == ["note 1. why 2. how", "approved stamp", "tool stamp ada"]


def test_sigkilled_run_recovers_on_sqlite(tmp_path: Path) -> None:
    crash_and_recover(f"sqlite:///{tmp_path / 'dbos.sqlite'}", tmp_path)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    name = f"chatclient_dbos_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(
        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT"
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.postgres
def test_sigkilled_run_recovers_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    crash_and_recover(postgres_url, tmp_path)


def test_parallel_workflows_are_refused_and_bad_arguments() -> None:
    from chatclient.agents import agent_function, parallel
    from chatclient.durable.dbos import durable

    @agent_function(output_key="a")
    def one() -> str:
        return "1"

    @agent_function(output_key="b")
    def two() -> str:
        return "2"

    with pytest.raises(TypeError, match="in parallel"):
        durable(parallel(one, two), name="p")
    with pytest.raises(TypeError, match=r"chatclient\.agents"):
        durable(lambda: None, name="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name="):
        durable(one, name="")

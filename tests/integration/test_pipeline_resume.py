"""DocumentPipeline survives a crash: a real subprocess is killed mid-run (SIGKILL) and the rerun resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chatclient.rag import HashingEmbeddingModel, SqliteVectorStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from chatclient.rag import DocumentPipeline, HashingEmbeddingModel, SqliteVectorStore, TextReader
    from chatclient.rag import TokenTextSplitter

    class SlowEmbedding(HashingEmbeddingModel):
        # slow enough that the parent can kill the run between batches
        def embed(self, texts):
            time.sleep(float(sys.argv[3]))
            return super().embed(texts)

    work = Path(sys.argv[1])
    readers = [TextReader(p) for p in sorted((work / "docs").glob("*.txt"))]
    splitter = TokenTextSplitter(chunk_size=30, min_chunk_size_chars=10, encoding="simple")
    with SqliteVectorStore(work / "vectors.db", SlowEmbedding()) as store:
        pipeline = DocumentPipeline(readers, [splitter], store, batch_size=5, max_concurrency=2,
                                    checkpoint=work / "ingest.ckpt", progress=sys.argv[2] == "progress")
        docs = pipeline.run()
        print("DONE", len(docs), pipeline.last_report.written, pipeline.last_report.skipped, flush=True)
    """
)


def _run(work: Path, delay: float, progress: str = "quiet") -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(work / "ingest.py"), str(work), progress, str(delay)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_killed_ingestion_resumes_without_duplicates(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for i in range(8):
        body = " ".join(f"Sentence {j} of file {i} mentions item {i}-{j}." for j in range(15))
        (tmp_path / "docs" / f"f{i}.txt").write_text(body)
    (tmp_path / "ingest.py").write_text(SCRIPT)
    ckpt = tmp_path / "ingest.ckpt"

    proc = _run(tmp_path, 0.15)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if ckpt.exists() and len(ckpt.read_text().split()) >= 10:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    done_before = len(set(ckpt.read_text().split()))
    assert done_before >= 10

    rerun = _run(tmp_path, 0.0)
    out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, err
    _, total, written, skipped = out.split()
    total_n, written_n, skipped_n = int(total), int(written), int(skipped)
    assert skipped_n >= done_before and written_n == total_n - skipped_n and written_n > 0

    with SqliteVectorStore(tmp_path / "vectors.db", HashingEmbeddingModel()) as store:
        assert len(store) == total_n  # every chunk once: nothing lost, nothing duplicated
    assert len(set(ckpt.read_text().split())) == total_n

    third = _run(tmp_path, 0.0)
    out, _ = third.communicate(timeout=60)
    assert out.split()[2:] == ["0", str(total_n)]  # a finished run writes nothing again


def test_ctrl_c_says_what_was_written_and_the_rerun_bar_counts_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for i in range(8):
        (tmp_path / "docs" / f"f{i}.txt").write_text(
            " ".join(f"Line {j} of file {i} about {i}-{j}." for j in range(15))
        )
    (tmp_path / "ingest.py").write_text(SCRIPT)
    ckpt = tmp_path / "ingest.ckpt"
    proc = _run(tmp_path, 0.15, "progress")
    deadline = time.monotonic() + 30
    while not (ckpt.exists() and len(ckpt.read_text().split()) >= 10):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGINT, err  # Python's end on Ctrl-C: the shell's status 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    (said,) = [line for line in err.splitlines() if "interrupted" in line]
    saved = len(set(ckpt.read_text().split()))
    assert said.startswith(f"document pipeline interrupted: {saved} of ")
    assert f"checkpoint {str(ckpt)!r} lists them" in said and "Run the same pipeline again to resume" in said

    rerun = _run(tmp_path, 0.0, "progress")
    _out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, err
    first = err.strip().splitlines()[0]
    assert f"{saved} from checkpoint" in first and f"{saved}/" in first

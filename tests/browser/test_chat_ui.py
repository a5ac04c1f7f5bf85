"""The chat page of examples/chat_ui (``ai_sdk_app`` behind it) in a real headless Chromium (selenium + Debian's
chromium-driver).

The app runs as a user runs it (``python examples/chat_ui/app.py --scripted``) in a subprocess on a
free port, with the slow scripted model (one word every 50 ms, 600+ words). The test types a
question, watches the searching line, a source card, the tool panel and the answer growing word by
word, presses Stop, and reads the server's own counters (``/api/stats``) to prove that generation
stopped: the stream was cancelled server-side and the word count no longer grows.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "chat_ui" / "app.py"
CHROMIUM = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
TOTAL_WORDS = 631  # the scripted answer: an 18-word lead, 600 filler words (--filler-words) and a 13-word note


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read(100_000))


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CHATCLIENT_BASE_URL")}
    proc = subprocess.Popen(
        [sys.executable, str(APP), "--scripted", "--filler-words", "600", "--port", str(port), "--token-delay", "0.05"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _get_json(url + "/api/stats")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = proc.stdout.read() if proc.stdout else ""
                    pytest.fail(f"the chat app did not start:\n{output}")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(
            f"no browser here: {CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def wait_until(predicate: Any, timeout: float = 10.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_tokens_stream_in_sources_and_tools_show_and_stop_cancels_generation(driver: Any, app_url: str) -> None:
    from selenium.webdriver.common.by import By

    before = _get_json(app_url + "/api/stats")
    driver.get(app_url + "/")
    question = driver.find_element(By.ID, "question")
    question.clear()
    question.send_keys("When are you open, and is a study room free?")
    driver.find_element(By.ID, "send").click()

    # a source card from the retrieval advisor, with the document's title and text
    card = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, ".source-card"), what="a source card")[0]
    assert "Opening hours" in driver.find_element(By.ID, "sources").text
    assert card.text.strip()

    # the tool panel shows the call and then its result
    tools = driver.find_element(By.ID, "tools")
    wait_until(lambda: "free_rooms" in tools.text and "→" in tools.text, what="the tool result")
    assert '"free":3' in tools.text

    # the answer grows word by word while the page stays responsive
    answer = driver.find_element(By.ID, "answer")
    wait_until(lambda: answer.text.startswith("The library is open"), what="the first words")
    lengths = []
    for _ in range(5):
        lengths.append(len(answer.text))
        time.sleep(0.25)
    assert all(b > a for a, b in itertools.pairwise(lengths)), lengths
    assert "word" in answer.text

    # the AI SDK stream's chunks came in the promised order: searching line and sources before the first token
    kinds = driver.execute_script("return window.chatEvents")
    first_text = kinds.index("text-delta")
    assert kinds[0] == "start"
    assert kinds.index("data-advisor") < kinds.index("source-document") < kinds.index("tool-input-start") < first_text
    assert kinds.index("tool-output-available") < first_text

    during = _get_json(app_url + "/api/stats")
    assert during["streams_open"] == 1
    driver.find_element(By.ID, "stop").click()
    wait_until(lambda: driver.find_element(By.ID, "status").text == "stopped", what="the page to say stopped")

    # server side: the stream was cancelled (not finished), and the model stopped producing words
    after = wait_until(
        lambda: (
            (s := _get_json(app_url + "/api/stats"))["streams_cancelled"] == before["streams_cancelled"] + 1
            and s["streams_open"] == 0
            and s
        ),
        what="the server to cancel the stream",
    )
    assert after["streams_finished"] == before["streams_finished"]
    produced = after["tokens_generated"] - before["tokens_generated"]
    time.sleep(0.6)  # twelve word intervals: a model still running would have produced more
    later = _get_json(app_url + "/api/stats")
    assert later["tokens_generated"] == after["tokens_generated"]
    assert 0 < produced < TOTAL_WORDS
    shown = len(answer.text.split())
    assert shown <= produced  # the page never shows more than the server generated

"""The agent monitor's HTML report in a real headless Chromium: the page loads from a file with no
network and no script, every invocation has its node and its timeline bar (with a real size), and a
hostile value shows as text instead of running."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.agents import AgentMonitor, Recovery, agent_function, parallel, sequence

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


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
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


@agent_function(output_key="echo")
def echo(payload: str) -> str:
    return payload


@agent_function(output_key="n")
def count(n: int = 0) -> int:
    return n + 1


@agent_function(name="broken")
def broken() -> None:
    raise RuntimeError("disk on fire")


def test_the_report_shows_every_invocation(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    monitor = AgentMonitor()
    wf = sequence(
        echo, parallel(count, broken, name="fan"), name="job", on_error=lambda ctx: Recovery.result("recovered")
    )
    wf.run(payload=HOSTILE, scope_id="run-1", monitor=monitor)
    tree = monitor.tree("run-1")
    invocations = list(tree.walk())
    page = tmp_path / "agents.html"
    monitor.html(page, title="Agent runs")

    driver.get(page.as_uri())
    assert driver.title == "Agent runs"
    assert driver.execute_script("return window.pwned === undefined")
    assert driver.find_elements(By.TAG_NAME, "script") == []
    assert driver.find_elements(By.CSS_SELECTOR, ".kv img") == []

    nodes = driver.find_elements(By.CSS_SELECTOR, ".node")
    assert [n.get_attribute("data-agent") for n in nodes] == [i.name for i in invocations]
    # the hostile payload is shown as text, in the echo agent's input and output
    echo_node = next(n for n in nodes if n.get_attribute("data-agent") == "echo")
    assert HOSTILE in echo_node.text

    # the failed agent is marked and shows its error
    failed = next(n for n in nodes if n.get_attribute("data-agent") == "broken")
    assert "RuntimeError: disk on fire" in failed.text
    colour = failed.find_element(By.CSS_SELECTOR, ".name").value_of_css_property("color")
    assert colour.replace(" ", "") in ("rgb(180,35,24)", "rgba(180,35,24,1)")

    # one timeline bar per invocation, each laid out with a real size inside the chart
    svg = driver.find_element(By.CSS_SELECTOR, "section.run svg")
    boxes = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('rect')).map(r => r.getBBox()).map(b => [b.width, b.height]);",
        svg,
    )
    assert len(boxes) == len(invocations)
    assert all(w >= 2 and h > 0 for w, h in boxes)
    assert len(driver.find_elements(By.CSS_SELECTOR, "section.run svg rect.err")) == sum(
        1 for i in invocations if i.error
    )

"""The HTML evaluation report in a real headless Chromium: the page loads from a file with no
network, and each of the four charts is drawn (its SVG and bars have a real, non-zero size)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.evaluation import render_html, run_evaluation
from tests.unit.test_evaluation_runner import DATASET, make_client

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(f"no browser here: {CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def test_the_report_page_draws_its_charts(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    baseline = run_evaluation(make_client(1), DATASET, name="one-line")
    report = run_evaluation(make_client(3), DATASET, name="three-lines")
    page = tmp_path / "report.html"
    page.write_text(render_html(report, baseline=baseline), encoding="utf-8")

    driver.get(page.as_uri())
    assert driver.title == "Evaluation: three-lines"
    for chart in ("chart-scores", "chart-evaluators", "chart-latency", "chart-diff"):
        svg = driver.find_element(By.ID, chart)
        assert svg.size["width"] > 100 and svg.size["height"] > 100, chart
        bars = svg.find_elements(By.CSS_SELECTOR, "rect")
        assert bars, f"{chart} has no bars"
        # the browser laid the bars out: each has a real box inside its chart
        boxes = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('rect')).map(r => r.getBBox()).map(b => [b.width, b.height, b.y]);",
            svg,
        )
        assert all(w > 0 and h > 0 and 0 <= y <= 200 for w, h, y in boxes), (chart, boxes)

    # the score histogram's bar heights follow the case counts: the tallest bin holds the most cases
    heights = driver.execute_script(
        "return Array.from(document.querySelectorAll('#chart-scores rect')).map(r => r.getBBox().height);"
    )
    counts = [0] * 10
    for case in report.cases:
        counts[min(int(case.score * 10), 9)] += 1
    assert heights.index(max(heights)) == counts.index(max(counts))

    # the run-vs-run chart colours better cases green; the table lists every case
    better = driver.find_elements(By.CSS_SELECTOR, "#chart-diff rect.better")
    assert len(better) == len(report.compare(baseline).better) > 0
    colour = better[0].value_of_css_property("fill")
    assert colour.replace(" ", "") in ("rgb(44,154,90)", "#2c9a5a")
    assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) == report.total

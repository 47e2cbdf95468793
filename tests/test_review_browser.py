"""The review app in a real browser: headless Chromium driven by selenium, against `python -m pipeline review`.

The loop of a maintainer: a first revision (`sample`) -> the review in the browser (two images
marked, one by click and one by keyboard; the class marked reviewed; a near-duplicate pair
confirmed) -> `sample --review` gives a revision without those images, with replacements from
the pool. A missing browser fails the test (the Makefile's test target installs it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_review import WNIDS, make_world

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def browser():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"the browser test needs {', '.join(missing)}: apt-get install chromium chromium-driver (make test does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,1080", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def server(tmp_path):
    world = make_world(tmp_path)
    port = _free_port()
    review = tmp_path / "REVIEW"
    command = [sys.executable, "-m", "pipeline", "review", "--pool", str(world.pool), "--revision", str(world.revision),
               "--output", str(review), "--originals", str(world.originals), "--near-duplicates", str(world.near_duplicates),
               "--port", str(port)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"review server exited: {process.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("review server did not start within 60 s")
    yield world, f"http://127.0.0.1:{port}", review
    process.terminate()
    process.wait(timeout=10)


def _wait(driver, condition, timeout=10.0):
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.support.ui import WebDriverWait

    # the pages re-render after each saved mark, so an element found a moment ago may be gone
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(lambda d: condition(d))


def _card(driver, candidate_id):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f'article.card[data-id="{candidate_id}"]')


def _ready(driver):
    return driver.execute_script("return document.body.dataset.ready") == "true"


def _sign_in(driver, url):
    from selenium.webdriver.common.by import By

    driver.get(url)
    name = _wait(driver, lambda d: d.find_element(By.ID, "reviewer-name"))
    _wait(driver, lambda d: name.is_displayed())
    name.send_keys("Ada Reviewer")
    driver.find_element(By.ID, "reviewer-save").click()
    _wait(driver, _ready)


def _review_class_page(driver, url, first, third):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _sign_in(driver, f"{url}/class#{WNIDS[0]}")
    # by click: the first image is not representative
    _card(driver, first).find_element(By.CSS_SELECTOR, 'button[data-reason="not_representative"]').click()
    _wait(driver, lambda d: "marked" in _card(d, first).get_attribute("class"))
    # by keyboard: select image 3, mark it a drawing, then the class reviewed
    ActionChains(driver).send_keys("3").perform()
    _wait(driver, lambda d: "selected" in _card(d, third).get_attribute("class"))
    ActionChains(driver).send_keys("a").perform()
    _wait(driver, lambda d: "marked" in _card(d, third).get_attribute("class"))
    ActionChains(driver).send_keys("r").perform()
    _wait(driver, lambda d: d.find_element(By.ID, "toggle-reviewed").get_attribute("aria-pressed") == "true")


def _save_screenshot(driver, path: Path) -> Path:
    driver.execute_script("document.getElementById('toast').style.display = 'none'")
    driver.save_screenshot(str(path))
    driver.execute_script("document.getElementById('toast').style.display = ''")
    return path


def test_review_in_browser_then_sample_replaces_the_rejected_images(server, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    world, url, review = server
    revision = json.loads(world.revision.read_text())
    class_a = [cid for cid, wnid in revision["image_filenames"] if wnid == WNIDS[0]]
    first, third = class_a[0], class_a[2]

    _review_class_page(browser, url, first, third)
    ActionChains(browser).send_keys("i").perform()  # the selected image's metadata
    panel = _wait(browser, lambda d: d.find_element(By.ID, "info-panel") if d.find_element(By.ID, "info-panel").is_displayed() else None)
    assert "sunset hill" in panel.text and third in panel.text and "open on Flickr" in panel.text
    _save_screenshot(browser, tmp_path / "review-class.png")

    browser.refresh()  # a reload shows the saved state
    _wait(browser, _ready)
    assert _card(browser, first).find_element(By.CSS_SELECTOR, 'button.reason.on').get_attribute("data-reason") == "not_representative"
    assert _card(browser, third).find_element(By.CSS_SELECTOR, 'button.reason.on').get_attribute("data-reason") == "drawing"
    assert browser.find_element(By.ID, "toggle-reviewed").get_attribute("aria-pressed") == "true"
    marked = browser.find_elements(By.CSS_SELECTOR, "article.card.marked")
    assert sorted(c.get_attribute("data-id") for c in marked) == sorted([first, third])
    ActionChains(browser).send_keys(".").perform()  # the next class
    _wait(browser, lambda d: d.find_element(By.ID, "class-name").text.startswith("goldfish"))
    assert browser.execute_script("return location.hash") == f"#{WNIDS[1]}"

    # the near-duplicate page opens on the first candidate to review: the planted copy of an original
    browser.get(f"{url}/near-duplicates")
    _wait(browser, _ready)
    pair = f'article.nd-card[data-metric="l2"][data-reference="{world.duplicate_of}"]'
    browser.find_element(By.CSS_SELECTOR, f"{pair} button.confirm").click()
    _wait(browser, lambda d: "confirmed" in d.find_element(By.CSS_SELECTOR, pair).get_attribute("class"))
    assert browser.find_element(By.CSS_SELECTOR, f'article.nd-card[data-metric="fc7"][data-reference="{world.duplicate_of}"]').get_attribute("class").split()[1] == "confirmed"
    _save_screenshot(browser, tmp_path / "review-near-duplicates.png")

    # the files say exactly that
    read = lambda name: json.loads((review / name).read_text())
    assert read("blacklist.json") == {first: "not representative of the class", third: "cartoon, painting, drawing or rendering"}
    assert {c: (m["reason"], m["reviewer"], m["wnid"]) for c, m in read("marks.json").items()} == {
        first: ("not_representative", "Ada Reviewer", WNIDS[0]), third: ("drawing", "Ada Reviewer", WNIDS[0])}
    assert read("class_state.json") == {WNIDS[0]: {"reviewed": True, "problematic": False},
                                        WNIDS[1]: {"reviewed": False, "problematic": False}, WNIDS[2]: {"reviewed": False, "problematic": False}}
    assert read("near_duplicates.json") == {world.duplicate: [world.duplicate_of]}
    pairs = [json.loads(line) for line in (review / "reviewed_pairs.jsonl").read_text().splitlines()]
    assert [(p["candidate_id"], p["metric"], p["reference_id"], p["reference_source"], p["decision"], p["reviewer"]) for p in pairs] == [
        (world.duplicate, "l2", world.duplicate_of, "validation", "near_duplicate", "Ada Reviewer")]

    # sample --review: a revision without the three images, with replacements from the pool
    output = tmp_path / "revisions" / "rev-1.json"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "sample", str(world.pool), "--rule", "top-images", "--seed", "0", "--per-class", "10",
         "--classes", ",".join(WNIDS), "--review", str(review), "--output", str(output)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    new = json.loads(output.read_text())
    old_ids = {cid for cid, _ in revision["image_filenames"]}
    new_ids = {cid for cid, _ in new["image_filenames"]}
    assert new["starting_from"] == "rev-0.json"
    assert len(new_ids) == 30 and not {first, third, world.duplicate} & new_ids
    assert old_ids - new_ids == {first, third, world.duplicate}
    assert len(new_ids - old_ids) == 3
    report = json.loads(output.with_name("rev-1.report.json").read_text())["review"]
    assert report["replaced"] == 3 and report["blacklisted"] == 2 and report["confirmed_near_duplicates"] == 1
    assert report["per_class"] == {WNIDS[0]: {"cartoon, painting, drawing or rendering": 1, "not representative of the class": 1},
                                   WNIDS[1]: {"near-duplicate": 1}}

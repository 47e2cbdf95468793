"""The task page and the local annotation page in a real browser (headless Chromium via selenium).

What the page posts (to a stand-in for MTurk's externalSubmit, or to our annotation server),
fed to ``ingest --tasks``, must give exactly the images clicked. A missing browser fails these
tests loudly: ``make browser`` installs Debian's chromium and chromium-driver.
"""

import csv
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pyarrow.parquet as pq
import pytest

from pipeline.rebuild.annotate import AnnotationSession, annotation_app
from pipeline.rebuild.batch_results import read_batch_input, results_row, write_results
from pipeline.rebuild.ingest import ingest
from pipeline.rebuild.task_key import TaskKey
from pipeline.rebuild.task_page import fill_page
from pipeline.rebuild.tasks import TasksConfig, make_tasks
from pipeline.toys.annotators import write_original_images, write_toy_pool

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("annotate")
    pool = write_toy_pool(root / "pool", n_classes=2, candidates_per_class=50, originals_per_class=6, images=True)
    write_original_images(root / "originals.parquet", pool)
    pool.write_candidates_jsonl(root / "candidates.jsonl")
    pool.write_originals_csv(root / "originals.csv")
    make_tasks(root / "pool", root / "tasks", TasksConfig(), original_images=root / "originals.parquet",
               environ={"TASKS_SECRET": "browser test secret 0123456789"})
    return root


@pytest.fixture(scope="module")
def browser():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"the browser tests need {', '.join(missing)}: run `make browser` (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def click_tiles(driver, positions):
    from selenium.webdriver.common.by import By

    for n in positions:
        driver.find_element(By.ID, f"tile-{n}").click()


def wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the browser")


def ingest_selected(root, results, tmp_path):
    """The pool's annotations of ``results``: assignment → the ids it selected, and the ids it showed."""
    ingest(tmp_path / "pool", candidates=root / "candidates.jsonl", originals=root / "originals.csv", results=[results], tasks=[root / "tasks"])
    shown, selected = {}, {}
    for row in pq.read_table(tmp_path / "pool" / "annotations.parquet").to_pylist():
        shown.setdefault(row["assignment_id"], []).append(row["image_id"])
        selected.setdefault(row["assignment_id"], set())
        if row["selected"]:
            selected[row["assignment_id"]].add(row["image_id"])
    return shown, selected


class FakeMTurkPage(BaseHTTPRequestHandler):
    """Serves one filled task page and its images, and captures the form's externalSubmit post."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = urlparse(self.path).path
        if path == "/task":
            body, kind = self.server.page.encode(), "text/html; charset=utf-8"
        elif path.startswith("/upload/"):
            body, kind = (self.server.folder / path.lstrip("/")).read_bytes(), "image/jpeg"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.posted.append((urlparse(self.path).path, parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"thank you")


@pytest.mark.integration
def test_task_page_posts_exactly_the_clicked_images(folder, browser, tmp_path):
    from selenium.webdriver.common.by import By

    row = read_batch_input(folder / "tasks")[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeMTurkPage)
    server.page, server.folder, server.posted = fill_page((folder / "tasks" / "task.html").read_text(), row), folder / "tasks", []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        browser.get(f"{base}/task?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1&turkSubmitTo={base}")
        assert not browser.find_element(By.ID, "submit-button").is_enabled()  # MTurk's preview: no answers
        browser.get(f"{base}/task?assignmentId=A1&hitId=H1&workerId=W1&turkSubmitTo={base}")
        assert "tench" in browser.title or row["class_name"] in browser.title
        wait_for(lambda: browser.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"))
        click_tiles(browser, [3, 10, 47, 5, 5])  # 5 clicked twice: undone
        browser.find_element(By.ID, "submit-button").click()
        wait_for(lambda: server.posted)
    finally:
        server.shutdown()
    path, form = server.posted[0]
    assert path == "/mturk/externalSubmit" and form["assignmentId"] == ["A1"] and len(form["selected"]) == 3
    # what MTurk would give back: the multi-select field joined by |
    with open(tmp_path / "results.csv", "w", newline="") as f:
        fields = {"HITId": "H1", "AssignmentId": "A1", "WorkerId": "W1", "AssignmentStatus": "Submitted"}
        write_results(f, [results_row(fields, row, form["selected"])], list(row))
    shown, selected = ingest_selected(folder, tmp_path / "results.csv", tmp_path)
    key = TaskKey.load([folder / "tasks"])
    ids = [key.entries[n].id for n in key.tasks[row["task_id"]].images]
    assert shown["A1"] == ids and selected["A1"] == {ids[2], ids[9], ids[46]}


@pytest.fixture()
def annotation_server(folder, tmp_path):
    import uvicorn

    session = AnnotationSession(folder / "tasks", tmp_path / "local-results.csv")
    server = uvicorn.Server(uvicorn.Config(annotation_app(session), host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    yield f"http://127.0.0.1:{server.config.port}", session
    server.should_exit = True
    thread.join(10)


@pytest.mark.integration
def test_local_annotation_page_round_trip(folder, browser, annotation_server, tmp_path):
    from selenium.webdriver.common.by import By

    base, session = annotation_server
    key = TaskKey.load([folder / "tasks"])
    order = list(session.batch)
    clicks = {order[0]: [1, 2, 48], order[1]: []}
    browser.get(base + "/")
    browser.find_element(By.ID, "annotator").send_keys("alice")
    browser.find_element(By.ID, "start-button").click()
    for task_id, positions in clicks.items():
        wait_for(lambda: f"/task/{task_id}" in browser.current_url)
        wait_for(lambda: browser.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"))
        click_tiles(browser, positions)
        browser.find_element(By.ID, "submit-button").click()
    wait_for(lambda: f"/task/{order[2]}" in browser.current_url)  # one task after another
    with open(tmp_path / "local-results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Input.task_id"] for r in rows] == order[:2] and {r["WorkerId"] for r in rows} == {"alice"}
    shown, selected = ingest_selected(folder, tmp_path / "local-results.csv", tmp_path)
    for row in rows:
        ids = [key.entries[n].id for n in key.tasks[row["Input.task_id"]].images]
        assert shown[row["AssignmentId"]] == ids
        assert selected[row["AssignmentId"]] == {ids[p - 1] for p in clicks[row["Input.task_id"]]}
    # and on to selection frequencies: per (image, class), alice's clicks over the times it was shown
    from collections import Counter

    from pipeline.rebuild.selection_frequency import selection_frequency_stage

    path, _ = selection_frequency_stage(tmp_path / "pool")
    shown_count, clicked = Counter(), Counter()
    for task_id, positions in clicks.items():
        task = key.tasks[task_id]
        for p, name in enumerate(task.images, start=1):
            shown_count[(key.entries[name].id, task.wnid)] += 1
            clicked[(key.entries[name].id, task.wnid)] += p in positions
    frequencies = {(r["image_id"], r["wnid"]): (r["num_selected"], r["num_shown"]) for r in pq.read_table(path).to_pylist()}
    assert frequencies == {pair: (clicked[pair], n) for pair, n in shown_count.items()} and sum(clicked.values()) == 3
    # a restarted server continues: alice's next task is the third
    again = AnnotationSession(folder / "tasks", tmp_path / "local-results.csv")
    assert again.next_task("alice") == order[2] and again.next_task("bob") == order[0]


def test_the_token_guards_a_non_local_server(folder, tmp_path):
    from starlette.testclient import TestClient

    from pipeline.rebuild.local_server import TokenMiddleware

    session = AnnotationSession(folder / "tasks", tmp_path / "r.csv")
    client = TestClient(TokenMiddleware(annotation_app(session), "s3cret-token"))
    assert client.get("/").status_code == 403
    assert client.get("/?token=s3cret-token").status_code == 200
    assert client.get("/").status_code == 200  # the cookie the first good request set
    assert client.post("/mturk/externalSubmit", data={"assignmentId": "forged"}).status_code == 400
    assert not (tmp_path / "r.csv").exists()


def test_a_taken_port_is_one_clear_sentence(folder, tmp_path, capsys):
    from pipeline.__main__ import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code = main(["annotate", str(folder / "tasks"), "--port", str(s.getsockname()[1]), "--output", str(tmp_path / "r.csv")])
    assert code == 1 and "pass another --port" in capsys.readouterr().err


@pytest.mark.integration
def test_on_another_address_the_command_prints_a_token_once_and_requires_it(folder, tmp_path):
    import os
    import re
    import subprocess
    import sys

    import httpx

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "pipeline", "annotate", str(folder / "tasks"), "--host", "0.0.0.0",
                                "--port", str(port), "--output", str(tmp_path / "r.csv")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=os.environ | {"PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        line = process.stderr.readline()
        token = re.search(r"\?token=([\w-]+)", line).group(1)
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _answers(url))
        assert httpx.get(url).status_code == 403
        assert httpx.get(url, params={"token": token}).status_code == 200
    finally:
        process.terminate()
        out, err = process.communicate(timeout=20)
    assert (line + err + out).count(token) == 1  # printed once, never logged


def _answers(url):
    import httpx

    try:
        return httpx.get(url).status_code in (200, 403)
    except httpx.TransportError:
        return False

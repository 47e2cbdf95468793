"""The review app without a browser: every endpoint, concurrent writers, the token, path traversal, bad inputs."""

from __future__ import annotations

import doctest
import importlib
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers_review import WNIDS, make_world
from starlette.testclient import TestClient

from pipeline.core.ownership import OutputError
from pipeline.rebuild.local_server import TokenMiddleware, access_token, server_url
from pipeline.rebuild.review.server import create_app
from pipeline.rebuild.review.session import open_session
from pipeline.rebuild.review_folder import REASONS

WHO = "Grace"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("review-world"))


def _session(world, output, **kwargs):
    kwargs.setdefault("originals", [world.originals])
    kwargs.setdefault("near_duplicates", world.near_duplicates)
    return open_session(world.pool, world.revision, output, **kwargs)


def _read(folder, name):
    return json.loads((folder / name).read_text())


def _images(world, wnid):
    return [c for c, w in json.loads(world.revision.read_text())["image_filenames"] if w == wnid]


@pytest.mark.parametrize("module", ["pipeline.rebuild.review_folder", "pipeline.rebuild.review.images",
                                    "pipeline.rebuild.review.carry_over", "pipeline.rebuild.review.session"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_pages_session_and_class_endpoints(world, tmp_path):
    client = TestClient(create_app(_session(world, tmp_path / "R")))
    assert client.get("/", follow_redirects=False).headers["location"] == "/class"
    for page in ("/class", "/near-duplicates"):
        response = client.get(page)
        assert response.status_code == 200 and "text/html" in response.headers["content-type"]
        assert "script-src 'self'" in response.headers["content-security-policy"]
    assert client.get("/static/class.js").status_code == 200 and client.get("/static/review.css").status_code == 200
    info = client.get("/api/session").json()
    assert info["revision"] == "rev-0.json" and info["rule"] == "top-images" and info["near_duplicates"] is True
    assert [r["key"] for r in info["reasons"]] == list(REASONS)
    assert [(c["wnid"], c["images"], c["reviewed"], c["marked"], c["new"]) for c in info["classes"]] == [(w, 10, False, 0, 10) for w in WNIDS]
    page = client.get(f"/api/class/{WNIDS[0]}").json()
    assert page["name"] == "tench" and [i["id"] for i in page["images"]] == _images(world, WNIDS[0])
    assert len(page["originals"]) == 10 and all(o["available"] for o in page["originals"])
    assert page["originals"] == client.get(f"/api/class/{WNIDS[0]}").json()["originals"]  # the same ten on every visit
    meta = page["images"][0]["metadata"]
    assert meta["search_key"] == "sunset hill" and meta["flickr"].startswith("https://www.flickr.com/photo.gne?id=8")
    assert 0 < meta["selection_frequency"] <= 1 and meta["num_annotations"] == 12
    assert client.get("/api/class/n99999999").status_code == 404


def test_marks_and_class_state_are_saved_as_clicked(world, tmp_path):
    client = TestClient(create_app(_session(world, tmp_path / "R")))
    a = _images(world, WNIDS[0])
    assert client.post("/api/mark", json={"candidate_id": a[0], "reason": "wrong_class", "note": " a fish? ", "reviewer": WHO}).status_code == 200
    client.post("/api/mark", json={"candidate_id": a[1], "reason": None, "note": "fine, but dark", "reviewer": WHO})
    client.post("/api/mark", json={"candidate_id": a[2], "reason": "unclear", "note": "", "reviewer": WHO})
    client.post("/api/mark", json={"candidate_id": a[2], "reason": None, "note": "", "reviewer": WHO})  # cleared again
    assert _read(tmp_path / "R", "blacklist.json") == {a[0]: "wrong class"}
    marks = _read(tmp_path / "R", "marks.json")
    assert {c: (m["reason"], m["note"], m["reviewer"]) for c, m in marks.items()} == {a[0]: ("wrong_class", "a fish?", WHO), a[1]: (None, "fine, but dark", WHO)}
    state = client.post("/api/class-state", json={"wnid": WNIDS[0], "reviewed": True, "reviewer": WHO}).json()["state"]
    assert state == {"reviewed": True, "problematic": False}
    client.post("/api/class-state", json={"wnid": WNIDS[2], "problematic": True, "reviewer": WHO})
    assert _read(tmp_path / "R", "class_state.json") == {WNIDS[0]: {"reviewed": True, "problematic": False},
                                                       WNIDS[1]: {"reviewed": False, "problematic": False},
                                                       WNIDS[2]: {"reviewed": False, "problematic": True}}
    assert sorted(_read(tmp_path / "R", "reviewed_images.json")) == sorted(a)
    assert _read(tmp_path / "R", "class_log.json")[WNIDS[2]]["reviewer"] == WHO
    page = client.get(f"/api/class/{WNIDS[0]}").json()
    assert page["images"][0]["mark"]["reason"] == "wrong_class" and not any(i["new"] for i in page["images"])
    # a new session on the same folder (a restart) resumes the saved state
    again = TestClient(create_app(_session(world, tmp_path / "R"))).get("/api/session").json()["classes"]
    assert [(c["reviewed"], c["problematic"], c["marked"]) for c in again] == [(True, False, 1), (False, False, 0), (False, True, 0)]


@pytest.mark.parametrize("body, status, words", [
    ({"candidate_id": "0" * 40, "reason": "wrong_class", "reviewer": WHO}, 404, "not an image of the revision"),
    ({"reason": "cute", "reviewer": WHO}, 400, "unknown reason 'cute'"),
    ({"reason": "wrong_class"}, 400, "reviewer name"),
    ({"reason": "wrong_class", "reviewer": "  "}, 400, "reviewer name"),
    ({"reason": None, "note": "x" * 3000, "reviewer": WHO}, 400, "at most 2000"),
])
def test_bad_marks_are_refused_with_a_sentence(world, tmp_path, body, status, words):
    client = TestClient(create_app(_session(world, tmp_path / "R")))
    body = {"candidate_id": _images(world, WNIDS[0])[0], **body}
    response = client.post("/api/mark", json=body)
    assert response.status_code == status and words in response.json()["error"]
    assert client.post("/api/mark", content=b"not json", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/api/class-state", json={"wnid": WNIDS[0], "reviewed": "yes", "reviewer": WHO}).status_code == 400
    assert _read(tmp_path / "R", "blacklist.json") == {}


def test_near_duplicate_endpoints(world, tmp_path):
    client = TestClient(create_app(_session(world, tmp_path / "R")))
    listing = client.get("/api/near-duplicates").json()
    assert listing["thresholds"] == {"l2": 1.2e8, "fc7": 13200.0, "dssim": 0.2205}
    assert [c["candidate_id"] for c in listing["candidates"]] == [world.duplicate, world.candidates[WNIDS[0]][0]]  # revision order
    assert not any(c["sufficient"] for c in listing["candidates"])
    detail = client.get(f"/api/near-duplicates/{world.duplicate}").json()
    l2 = detail["metrics"]["l2"]["neighbours"]
    assert [n["distance"] for n in l2] == sorted(n["distance"] for n in l2)
    assert [(n["reference_id"], n["below_threshold"], n["available"]) for n in l2[:2]] == [
        (world.duplicate_of, True, True), (world.candidates[WNIDS[1]][5], True, True)]
    assert detail["status"] == {"fc7": {"sufficient": False, "unreviewed_below_threshold": 1}, "l2": {"sufficient": False, "unreviewed_below_threshold": 2}}

    def pair(reference, decision, metric="l2"):
        body = {"candidate_id": world.duplicate, "reference_id": reference, "metric": metric, "decision": decision, "reviewer": WHO}
        return client.post("/api/pair", json=body)

    def lines():
        text = (tmp_path / "R" / "reviewed_pairs.jsonl").read_text()
        return [(r["candidate_id"], r["metric"], r["reference_id"], r["reference_source"], r["decision"], r["reviewer"]) for r in map(json.loads, text.splitlines())]

    assert pair(world.duplicate_of, "confirm").json()["decisions"] == {world.duplicate_of: "confirmed"}
    other = world.candidates[WNIDS[1]][5]
    assert pair(other, "reject").json()["decisions"] == {world.duplicate_of: "confirmed", other: "rejected"}
    folder = tmp_path / "R"
    assert _read(folder, "near_duplicates.json") == {world.duplicate: [world.duplicate_of]}
    assert lines() == [(world.duplicate, "l2", world.duplicate_of, "validation", "near_duplicate", WHO),
                       (world.duplicate, "l2", other, "candidates", "distinct", WHO)]
    status = client.get("/api/near-duplicates").json()["candidates"][0]  # a reviewed pair counts for every measure
    assert status["candidate_id"] == world.duplicate and status["sufficient"] is True
    pair(other, "confirm", metric="fc7")  # a changed mind: one line per pair, the last decision
    assert lines() == [(world.duplicate, "l2", world.duplicate_of, "validation", "near_duplicate", WHO),
                       (world.duplicate, "fc7", other, "candidates", "near_duplicate", WHO)]
    pair(world.duplicate_of, "undo")
    pair(other, "undo")
    assert _read(folder, "near_duplicates.json") == {} and lines() == []
    assert client.get("/api/near-duplicates").json()["candidates"][0]["sufficient"] is False
    assert pair("ILSVRC2012_val_00000001.JPEG", "confirm").status_code == 404  # not one of its neighbours
    assert pair(other, "maybe").status_code == 400
    assert client.get(f"/api/near-duplicates/{world.candidates[WNIDS[2]][0]}").status_code == 404


def test_without_a_near_duplicate_search_its_endpoints_say_so(world, tmp_path):
    client = TestClient(create_app(_session(world, tmp_path / "R", near_duplicates=None)))
    assert client.get("/api/session").json()["near_duplicates"] is False
    response = client.get("/api/near-duplicates")
    assert response.status_code == 404 and "--near-duplicates" in response.json()["error"]


def test_images_are_served_by_id_only(world, tmp_path):
    client = TestClient(create_app(_session(world, tmp_path / "R")))
    cid = _images(world, WNIDS[0])[0]
    response = client.get(f"/image/candidate/{cid}")
    assert response.status_code == 200 and response.headers["content-type"] == "image/jpeg" and response.content[:3] == b"\xff\xd8\xff"
    assert client.get(f"/image/original/{world.duplicate_of}").status_code == 200
    assert client.get(f"/image/reference/{world.duplicate_of}").content == client.get(f"/image/original/{world.duplicate_of}").content
    assert client.get(f"/image/reference/{cid}").status_code == 200  # a candidate as a reference
    (world.pool / "secret.jpg").write_bytes(b"\xff\xd8\xff private")
    for attempt in ("/image/candidate/..%2Fsecret.jpg", "/image/candidate/..%2F..%2Fpool%2Fcandidates.parquet", "/image/original/%2Fetc%2Fpasswd",
                    f"/image/original/{cid}", "/image/file/%2Fetc%2Fpasswd", "/image/candidate/../../etc/passwd", "/static/..%2Fserver.py",
                    "/static/../server.py", "/image/reference/secret.jpg"):
        response = client.get(attempt)
        assert response.status_code == 404, attempt
        assert b"private" not in response.content and b"root:" not in response.content


def test_two_clients_writing_at_once_lose_no_mark(world, tmp_path):
    app = create_app(_session(world, tmp_path / "R"))
    tabs = [TestClient(app), TestClient(app)]
    jobs = [(tabs[k % 2], cid, list(REASONS)[k % len(REASONS)]) for k, cid in enumerate(_images(world, WNIDS[0]) + _images(world, WNIDS[1]))]

    def mark(job):
        client, cid, reason = job
        return client.post("/api/mark", json={"candidate_id": cid, "reason": reason, "note": f"by {id(client)}", "reviewer": WHO}).status_code

    def state(k):
        return tabs[k % 2].post("/api/class-state", json={"wnid": WNIDS[2], "problematic" if k % 2 else "reviewed": True, "reviewer": WHO}).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(mark, jobs * 3)) + list(pool.map(state, range(6)))
    assert set(codes) == {200}
    blacklist = _read(tmp_path / "R", "blacklist.json")
    assert blacklist == {cid: REASONS[reason] for _, cid, reason in jobs}
    assert set(_read(tmp_path / "R", "marks.json")) == set(blacklist)
    assert _read(tmp_path / "R", "class_state.json")[WNIDS[2]] == {"reviewed": True, "problematic": True}
    for tab in tabs:  # each tab sees the other's marks
        assert sum(c["marked"] for c in tab.get("/api/session").json()["classes"]) == 20


def test_the_access_token(world, tmp_path):
    assert access_token("127.0.0.1") is None and access_token("localhost") is None
    token = access_token("0.0.0.0")
    assert token and len(token) >= 24 and server_url("0.0.0.0", 8000, token, "/class").endswith(f"/class?token={token}")
    client = TestClient(TokenMiddleware(create_app(_session(world, tmp_path / "R")), token))
    for path in ("/class", "/api/session", f"/image/candidate/{_images(world, WNIDS[0])[0]}", "/static/class.js"):
        assert client.get(path).status_code == 403
        assert client.get(path, params={"token": "wrong"}).status_code == 403
    assert client.post("/api/mark", json={"candidate_id": _images(world, WNIDS[0])[0], "reason": "drawing", "reviewer": WHO}).status_code == 403
    assert _read(tmp_path / "R", "blacklist.json") == {}
    assert client.get("/class", params={"token": token}).status_code == 200  # sets the cookie
    assert client.get("/api/session").status_code == 200
    fresh = TestClient(TokenMiddleware(create_app(_session(world, tmp_path / "R")), token))
    assert fresh.get("/api/session", headers={"X-Access-Token": token}).status_code == 200


def test_a_revision_that_does_not_match_the_pool_is_refused_at_start(world, tmp_path):
    data = json.loads(world.revision.read_text())
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({**data, "image_filenames": [["f" * 40, WNIDS[0]], *data["image_filenames"][1:]]}))
    with pytest.raises(ValueError, match=r"does not match the pool .*image_filenames\[0\] f{40} is not a candidate of the pool"):
        open_session(world.pool, foreign, tmp_path / "R")
    i, a = next((i, c) for i, (c, w) in enumerate(data["image_filenames"]) if w == WNIDS[0])
    b = WNIDS[1]
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps({**data, "image_filenames": [*data["image_filenames"][:i], [a, b], *data["image_filenames"][i + 1:]]}))
    with pytest.raises(ValueError, match=f"listed under {b}, but the pool has it under {WNIDS[0]}"):
        open_session(world.pool, moved, tmp_path / "R")
    assert not (tmp_path / "R").exists()  # nothing written before the checks pass
    from pipeline.__main__ import main

    code = main(["review", "--pool", str(world.pool), "--revision", str(foreign), "--output", str(tmp_path / "R"), "--port", "0"])
    assert code == 1


def test_the_review_folder_is_ours_and_belongs_to_one_revision(world, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    with pytest.raises(OutputError, match="not written by this project"):
        _session(world, mine)
    _session(world, tmp_path / "R")
    other = tmp_path / "other.json"
    data = json.loads(world.revision.read_text())
    other.write_text(json.dumps({**data, "image_filenames": data["image_filenames"][:-1]}))
    with pytest.raises(ValueError, match="holds the review of rev-0.json, not of other.json"):
        open_session(world.pool, other, tmp_path / "R")
    with pytest.raises(OutputError, match="both"):
        _session(world, tmp_path / "R", starting_from=tmp_path / "R")


@pytest.mark.integration
def test_the_command_beyond_localhost_prints_a_token_url_once_and_refuses_requests_without_it(world, tmp_path):
    import os
    import re
    import socket
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "pipeline", "review", "--pool", str(world.pool), "--revision", str(world.revision),
               "--output", str(tmp_path / "R"), "--host", "0.0.0.0", "--port", str(port)]
    process = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        line = process.stderr.readline()
        match = re.search(rf"http://0\.0\.0\.0:{port}/class\?token=([\w-]+)", line)
        assert match, line
        token = match.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/session?token={token}") as response:
                    assert json.loads(response.read())["revision"] == "rev-0.json"
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/session")
        assert refused.value.code == 403
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert token not in out + err  # printed once, in the URL, never logged again


def test_one_server_per_review_folder(world, tmp_path):
    import subprocess
    import sys

    _session(world, tmp_path / "R")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "R" / ".review-server.pid").write_text(f"{sleeper.pid}\n")
        with pytest.raises(ValueError, match=f"another review server \\(process {sleeper.pid}\\) is writing to"):
            _session(world, tmp_path / "R")
    finally:
        sleeper.kill()
        sleeper.wait()
    _session(world, tmp_path / "R")  # a stale claim (the process is gone) is taken over

"""download: the stored copies (EXIF orientation, RGB, sizes), failures with reasons, resume, nothing half-written."""

import hashlib
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_flickr import FakeFlickr, jpeg
from PIL import Image

from pipeline.rebuild.download import download
from pipeline.rebuild.stored_images import FAILURES, MANIFEST, is_store, read_store

ROOT = Path(__file__).resolve().parents[1]
BLUE = (0, 0, 255)


def candidates_file(path, flickr, photo_ids, extra=()):
    with open(path, "w") as f:
        for pid in photo_ids:
            cid = hashlib.sha1(f"{pid}flickr".encode()).hexdigest()
            f.write(json.dumps({"id_ours": cid, "wnid": "c1", "url": f"{flickr.base}/images/{pid}_o.jpg", "id_search_engine": pid}) + "\n")
        for record in extra:
            f.write(json.dumps(record) + "\n")
    return path


def cid(pid):
    return hashlib.sha1(f"{pid}flickr".encode()).hexdigest()


def is_blue(pixel):
    return pixel[2] > 180 and pixel[0] < 80


def manifest(store):
    return {r["candidate_id"]: r for r in map(json.loads, (store / MANIFEST).read_text().splitlines())}


def test_copies_are_upright_rgb_and_sized_and_the_original_bytes_are_kept(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photo("201", "x", image_size=(800, 600), orientation=6)  # rotate 90 degrees clockwise to view
        flickr.add_photo("202", "x", image_size=(48, 32))
        flickr.add_photo("203", "x", image_size=(64, 40), orientation=3)  # upside down
        served = {pid: flickr.image(f"{pid}_o.jpg")[2] for pid in ("201", "202", "203")}
        report = download(candidates_file(tmp_path / "c.jsonl", flickr, ["201", "202", "203"]), tmp_path / "store", workers=3, show_progress=False)
    store = tmp_path / "store"
    assert (report.stored, report.failed) == (3, 0) and is_store(store)
    records = manifest(store)
    for pid, data in served.items():
        record = records[cid(pid)]
        assert (store / record["original"]).read_bytes() == data and record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["original"].startswith(f"original/{cid(pid)[:2]}/") and record["format"] == "JPEG"
        near = Image.open(store / record["near_duplicate"])
        assert near.size == (256, 256) and near.mode == "RGB" and near.format == "JPEG"
    rotated = Image.open(store / records[cid("201")]["annotation"])
    assert rotated.size == (375, 500) and rotated.mode == "RGB"  # upright 600 x 800, longest side 500
    assert (records[cid("201")]["width"], records[cid("201")]["height"]) == (600, 800)
    assert is_blue(rotated.getpixel((rotated.width - 10, 10))) and not is_blue(rotated.getpixel((10, 10)))  # top-left went top-right
    small = Image.open(store / records[cid("202")]["annotation"])
    assert small.size == (48, 32) and is_blue(small.getpixel((2, 2)))  # never enlarged
    flipped = Image.open(store / records[cid("203")]["annotation"])
    assert flipped.size == (64, 40) and is_blue(flipped.getpixel((61, 37))) and not is_blue(flipped.getpixel((2, 2)))
    # the annotation copy is JPEG quality 90: re-encoding the same pixels at 90 gives the same bytes
    upright = Image.open(io.BytesIO(served["202"])).convert("RGB")
    buffer = io.BytesIO()
    upright.save(buffer, format="JPEG", quality=90)
    assert (store / records[cid("202")]["annotation"]).read_bytes() == buffer.getvalue()


def test_failures_are_recorded_with_reasons_and_never_stop_the_run(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photo("301", "x")
        flickr.add_photo("302", "x", image_status=404)
        flickr.add_photo("303", "x", not_an_image=True)
        no_url = {"id_ours": "f" * 40, "wnid": "c1", "url": None}
        refused = {"id_ours": "e" * 40, "wnid": "c1", "url": "http://127.0.0.1:9/nothing.jpg"}  # nothing listens on port 9
        path = candidates_file(tmp_path / "c.jsonl", flickr, ["301", "302", "303"], [no_url, refused])
        report = download(path, tmp_path / "store", workers=2, retries=1, backoff=0.01, show_progress=False)
    assert (report.candidates, report.stored, report.failed) == (5, 1, 4)
    assert report.failures == {"HTTP 404": 1, "no url": 1, "not an image": 1, "retries used up": 1}
    failures = {r["candidate_id"]: r for r in map(json.loads, (tmp_path / "store" / FAILURES).read_text().splitlines())}
    assert failures[cid("303")]["reason"].startswith(f"candidate {cid('303')}: not an image") and "[text/html]" in failures[cid("303")]["reason"]
    assert "gave up after 2 attempts (ConnectError" in failures["e" * 40]["reason"]
    paths, failed = read_store(tmp_path / "store")
    assert set(paths) == {cid("301")} and set(failed) == {cid("302"), cid("303"), "f" * 40, "e" * 40}
    assert not list((tmp_path / "store" / "original").rglob(f"{cid('303')}*"))  # nothing kept of a non-image


def test_a_rerun_fetches_only_what_is_missing(tmp_path):
    with FakeFlickr() as flickr:
        for pid in ("401", "402", "403"):
            flickr.add_photo(pid, "x")
        flickr.photos["403"].image_status = 500
        path = candidates_file(tmp_path / "c.jsonl", flickr, ["401", "402", "403"])
        first = download(path, tmp_path / "store", retries=0, show_progress=False)
        assert (first.stored, first.failed) == (2, 1)
        flickr.photos["403"].image_status = 200  # the server recovers
        flickr.image_requests.clear()
        second = download(path, tmp_path / "store", retries=0, show_progress=False)
    assert flickr.image_requests == ["/images/403_o.jpg"]
    assert (second.stored, second.failed, second.fetched_now) == (3, 0, 1)
    assert (tmp_path / "store" / FAILURES).read_text() == ""


def test_a_killed_download_leaves_no_store_to_ingest_and_resumes(tmp_path):
    with FakeFlickr() as flickr:
        ids = [str(500 + i) for i in range(24)]
        for pid in ids:
            flickr.add_photo(pid, "x")
        path = candidates_file(tmp_path / "c.jsonl", flickr, ids)
        args = [sys.executable, "-m", "pipeline", "download", str(path), "--output", str(tmp_path / "store"), "--workers", "2", "--requests-per-second", "10"]
        process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(flickr.image_requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert not is_store(tmp_path / "store")  # no list of images: ingest refuses it
        with pytest.raises(FileNotFoundError, match="not a finished image store"):
            read_store(tmp_path / "store")
        fetched_before = len(flickr.image_requests)
        resumed = subprocess.run(args[:-2], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout[: resumed.stdout.rindex("}") + 1])["stored"] == 24
    requests = flickr.image_requests
    assert len(set(requests)) == 24 and len(requests) - 24 <= 2  # at most the images in flight at the kill again
    assert fetched_before < 24
    leftovers = [p for p in (tmp_path / "store").rglob(".*tmp-*")]
    assert leftovers == []
    assert len(manifest(tmp_path / "store")) == 24


def test_rgb_conversion_of_png_with_alpha_and_grayscale(tmp_path):
    from pipeline.rebuild.stored_images import store_image

    buffer = io.BytesIO()
    Image.new("RGBA", (20, 10), (255, 0, 0, 128)).save(buffer, format="PNG")
    record = store_image(tmp_path, "a" * 40, "c1", buffer.getvalue())
    assert record["original"].endswith(".png") and Image.open(tmp_path / record["annotation"]).mode == "RGB"
    gray = io.BytesIO()
    Image.new("L", (10, 10), 128).save(gray, format="JPEG")
    record = store_image(tmp_path, "b" * 40, "c1", gray.getvalue())
    assert Image.open(tmp_path / record["near_duplicate"]).mode == "RGB"
    assert jpeg()[:3] == b"\xff\xd8\xff"

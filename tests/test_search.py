"""search: the Flickr queries sent (paper's settings), expansion steps, ids, faults, resume, the key kept secret."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
from fake_flickr import FakeFlickr

from pipeline.core.ownership import OutputError
from pipeline.rebuild.classes import class_list_from_entries
from pipeline.rebuild.flickr import FlickrClient, FlickrError, FlickrKeyError
from pipeline.rebuild.search import CANDIDATES, REPORT, search
from pipeline.rebuild.search_config import load_search_config

ROOT = Path(__file__).resolve().parents[1]
FAST = {"requests_per_second": 1000.0, "backoff_seconds": 0.01}


def classes_of(*entries):
    return class_list_from_entries([dict(e) for e in entries], "test classes")


TENCH = {"wnid": "n01440764", "name": "tench", "lemmas": ["tench", "Tinca tinca"], "parent": "cyprinid"}
GOLDFISH = {"wnid": "n01443537", "name": "goldfish", "lemmas": ["goldfish"], "parent": "cyprinid"}


def run_search(flickr, out, classes, *, key=None, queries_file=None, **settings):
    config = load_search_config(None, endpoint=flickr.endpoint, **{**FAST, **settings})

    def client():
        return FlickrClient(key or flickr.api_key, config.endpoint, requests_per_second=config.requests_per_second,
                            retries=config.retries, backoff=config.backoff_seconds, timeout=5)

    return search(out, classes, config, client, queries_file=queries_file, show_progress=False, uploader="tester")


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def api_requests(flickr):
    return [r for r in flickr.requests if "_fault" not in r]


def test_queries_carry_the_papers_settings_and_records_the_released_fields(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photos("goldfish", 3, start="2012-07-20")
        flickr.add_photos("goldfish", 2, start="2011-01-01")  # uploaded before the window: never found
        report = run_search(flickr, tmp_path / "out", classes_of(GOLDFISH), target_candidates=3)
        first = flickr.requests[0]
    assert first["method"] == "flickr.photos.search" and first["text"] == "goldfish"
    assert first["format"] == "json" and first["nojsoncallback"] == "1" and first["_key_ok"]
    assert (first["sort"], first["per_page"], first["page"]) == ("date-posted-asc", "500", "1")
    assert (first["min_taken_date"], first["max_taken_date"]) == ("2012-07-11", "2013-07-11")
    assert (first["min_upload_date"], first["max_upload_date"]) == ("2012-07-11", "2013-07-11")
    extras = first["extras"].split(",")
    assert {"url_o", "url_k", "url_h", "url_b", "url_c", "url_z", "owner_name", "date_upload", "date_taken", "o_dims"} <= set(extras)
    assert "api_key" not in first  # the fake never records it; the client sends it in the POST body
    records = read_jsonl(tmp_path / "out" / CANDIDATES)
    assert report.candidates == 3 == len(records)
    released = json.loads((resources.files("imagenetv2") / "data/candidates_in_final_sets.jsonl").open().readline())
    assert set(released) - {"batch"} <= set(records[0])
    r = records[0]
    assert r["id_ours"] == hashlib.sha1((r["id_search_engine"] + "flickr").encode()).hexdigest()
    assert (r["url_type"], r["width"], r["height"], r["search_step"], r["search_sort"]) == ("url_o", 1600, 1200, "lemmas", "date-posted-asc")
    assert (r["max_images"], r["min_uploaded_date"], r["max_uploaded_date"], r["uploader"]) == (100, "2012-07-11", "2013-07-11", "tester")
    assert r["date_upload_search_engine"] == "2012-07-20 01:00:00" and r["owner"] == "12345@N00"
    assert [x["date_upload_search_engine"] for x in records] == sorted(x["date_upload_search_engine"] for x in records)
    # the ImageNetV2 builder's metadata reader takes these records (as a search-result JSON list)
    from imagenetv2.features import METADATA_FIELDS
    from imagenetv2.metadata import search_result_records

    (tmp_path / "results.json").write_text(json.dumps(records))
    found = search_result_records([tmp_path / "results.json"], {x["id_ours"]: x["wnid"] for x in records})
    assert len(found) == 3 and all(found[x["id_ours"]][field] is not None for x in records for field in METADATA_FIELDS.values())


def test_pages_until_the_per_query_limit(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photos("tench", 100)
        flickr.add_photos("Tinca tinca", 15)
        run_search(flickr, tmp_path / "out", classes_of(TENCH), per_page=10, max_images=50, target_candidates=1)
        pages = [(r["text"], r["page"]) for r in flickr.requests]
    # 50 per class over 2 lemmas = 25 per query: 3 pages of "tench"; "Tinca tinca" ends after its 2 pages
    assert pages == [("tench", "1"), ("tench", "2"), ("tench", "3"), ("Tinca tinca", "1"), ("Tinca tinca", "2")]
    records = read_jsonl(tmp_path / "out" / CANDIDATES)
    assert [r["search_key"] for r in records].count("tench") == 25 and [r["search_key"] for r in records].count("Tinca tinca") == 15


def test_expansion_steps_run_in_order_for_short_classes_only(tmp_path):
    queries = tmp_path / "queries.yaml"
    queries.write_text("n01440764: [Schleie]\n")
    with FakeFlickr() as flickr:
        flickr.add_photos("tench", 12)
        flickr.add_photos("tench", 2, start="2013-09-01", taken="2013-06-01 12:00:00")  # only in the extended window
        flickr.add_photos("Tinca tinca", 1)
        flickr.add_photos("tench cyprinid", 2)
        flickr.add_photos("Tincatinca", 1)
        flickr.add_photos("Schleie", 2)
        flickr.add_photos("goldfish", 25)
        report = run_search(flickr, tmp_path / "out", classes_of(TENCH, GOLDFISH), queries_file=queries, max_images=20, target_candidates=20)
        sent = [(r["text"], r["max_upload_date"]) for r in flickr.requests]
    assert sent == [
        ("tench", "2013-07-11"), ("Tinca tinca", "2013-07-11"),  # lemmas, 10 per query
        ("tench cyprinid", "2013-07-11"), ("Tinca tinca cyprinid", "2013-07-11"),  # parent word
        # raised limit (200): the same first pages, already stored, so no request
        ("tench", "2014-07-11"), ("Tinca tinca", "2014-07-11"),  # extended window
        ("Tincatinca", "2014-07-11"),  # compound (the extended window carries over)
        ("Schleie", "2014-07-11"),  # hand-written
        ("goldfish", "2013-07-11"),  # goldfish has its 20 after the first step
    ]
    tench = report.summary["n01440764"]
    assert {step: s.candidates for step, s in tench.items()} == {
        "lemmas": 11, "parent-word": 2, "raised-limit": 2, "extended-window": 2, "compound": 1, "hand-written": 2}
    assert tench["raised-limit"].pages_reused == 2 and tench["raised-limit"].pages_fetched == 0
    assert list(report.summary["n01443537"]) == ["lemmas"]
    records = read_jsonl(tmp_path / "out" / CANDIDATES)
    steps = [(r["search_step"], r["search_key"], r["max_images"], r["max_uploaded_date"]) for r in records if r["wnid"] == "n01440764"]
    assert steps[-3:] == [("compound", "Tincatinca", 200, "2014-07-11"), ("hand-written", "Schleie", 200, "2014-07-11"), ("hand-written", "Schleie", 200, "2014-07-11")]
    assert ("extended-window", "tench", 200, "2014-07-11") in steps and ("parent-word", "tench cyprinid", 20, "2013-07-11") in steps
    summary = json.loads((tmp_path / "out" / REPORT).read_text())
    assert summary["per_class"]["n01440764"]["candidates"] == 20 and summary["per_class"]["n01443537"]["candidates"] == 20


def test_a_photo_found_for_two_classes_is_one_candidate_per_class(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photo("4883924079", "tench", also_texts=("goldfish",))
        flickr.add_photo("7559101832", "goldfish")
        report = run_search(flickr, tmp_path / "out", classes_of(TENCH, GOLDFISH), target_candidates=1)
    records = {(r["id_search_engine"], r["wnid"]): r for r in read_jsonl(tmp_path / "out" / CANDIDATES)}
    assert report.cross_class_photos == 1 and len(records) == 3
    shared_t, shared_g = records[("4883924079", "n01440764")], records[("4883924079", "n01443537")]
    assert shared_t["id_ours"] == hashlib.sha1(b"4883924079,flickr,n01440764").hexdigest() and shared_t["also_found_for"] == ["n01443537"]
    assert shared_g["id_ours"] == hashlib.sha1(b"4883924079,flickr,n01443537").hexdigest() and shared_g["also_found_for"] == ["n01440764"]
    single = records[("7559101832", "n01443537")]
    assert single["id_ours"] == "f655c56af601255a6566c5fe8ccfd2900751b2db" and "also_found_for" not in single  # as released


def test_url_is_the_largest_size_and_photos_without_any_are_skipped(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photo("101", "goldfish", sizes=())
        flickr.add_photo("102", "goldfish", sizes=("z", "c"))
        flickr.add_photo("103", "goldfish", sizes=("z", "k", "m"))
        report = run_search(flickr, tmp_path / "out", classes_of(GOLDFISH), target_candidates=1)
    records = {r["id_search_engine"]: r for r in read_jsonl(tmp_path / "out" / CANDIDATES)}
    assert set(records) == {"102", "103"} and report.summary["n01443537"]["lemmas"].without_url == 1
    assert (records["102"]["url_type"], records["102"]["width"]) == ("url_c", 800)
    assert (records["103"]["url_type"], records["103"]["width"], records["103"]["url"].endswith("/images/103_k.jpg")) == ("url_k", 1400, True)


def test_faults_are_retried_and_retry_after_is_honoured(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photos("goldfish", 3)
        for kind in ("500", "drop", "invalid-json"):
            flickr.fault(kind)
        flickr.fault("429", retry_after="1")
        report = run_search(flickr, tmp_path / "out", classes_of(GOLDFISH), target_candidates=3)
        log = list(flickr.requests)
    assert report.candidates == 3
    assert [r.get("_fault") for r in log] == ["500", "drop", "invalid-json", "429", None]
    assert log[4]["_time"] - log[3]["_time"] >= 0.95  # Retry-After: 1 (the backoff alone is 0.08 s)


def test_retries_give_up_with_a_clear_error(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photos("goldfish", 3)
        flickr.fault("500", times=10)
        with pytest.raises(FlickrError, match=r"gave up after 3 attempts \(HTTP 500\)"):
            run_search(flickr, tmp_path / "out", classes_of(GOLDFISH), retries=2)


def test_rejected_key_is_one_sentence(tmp_path):
    with FakeFlickr() as flickr:
        flickr.add_photos("goldfish", 3)
        with pytest.raises(FlickrKeyError, match="Flickr rejected the API key in FLICKR_API_KEY") as caught:
            run_search(flickr, tmp_path / "out", classes_of(GOLDFISH), key="wrong-key-SECRET")
    assert "SECRET" not in str(caught.value)


def test_an_output_folder_not_written_by_search_is_refused(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with FakeFlickr() as flickr:
        with pytest.raises(OutputError, match="refusing"):
            run_search(flickr, tmp_path / "mine", classes_of(GOLDFISH))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_bad_search_configs_are_refused(tmp_path):
    config = tmp_path / "search.yaml"
    config.write_text("sort: relevance\n")
    with pytest.raises(ValueError, match="sort 'relevance' is not allowed"):
        load_search_config(config)
    config.write_text("steps:\n  - {name: x, queries: synonyms}\n")
    with pytest.raises(ValueError, match="queries 'synonyms'"):
        load_search_config(config)
    config.write_text("max_upload_date: 2014-07-11\n")
    with pytest.raises(ValueError, match="unknown key.*max_upload_date"):
        load_search_config(config)


# --- the command: key handling and resume -----------------------------------------------------


def cli(args, env_extra, **kwargs):
    env = {k: v for k, v in os.environ.items() if k != "FLICKR_API_KEY"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, **kwargs)


def write_classes(path, *entries):
    path.write_text(json.dumps(list(entries)))
    return path


def fast_config(path, **extra):
    settings = {"requests_per_second": 1000, "backoff_seconds": 0.01, **extra}
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    return path


def test_command_keeps_the_key_out_of_every_output_and_names_a_missing_or_rejected_key(tmp_path):
    classes = write_classes(tmp_path / "classes.json", GOLDFISH)
    config = fast_config(tmp_path / "search.yaml", target_candidates=2)
    with FakeFlickr(api_key="KEY-abcdef-0123456789") as flickr:
        flickr.add_photos("goldfish", 2)
        flickr.fault("500")
        args = ["-v", "search", "--classes", str(classes), "--config", str(config), "--endpoint", flickr.endpoint, "--output", str(tmp_path / "out")]
        done = cli(args, {"FLICKR_API_KEY": flickr.api_key})
        assert done.returncode == 0, done.stderr
        assert "2 candidates for 1 classes" in done.stdout and "retry 1 of 5" in done.stderr  # -v shows the retry
        missing = cli(args, {})
        rejected = cli([*args[:-1], str(tmp_path / "other")], {"FLICKR_API_KEY": "NOT-THE-KEY-987"})
    everything = done.stdout + done.stderr + missing.stdout + missing.stderr + rejected.stdout + rejected.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            everything += path.read_text(errors="replace")
    assert "KEY-abcdef-0123456789" not in everything and "NOT-THE-KEY-987" not in everything
    assert missing.returncode == 1 and missing.stderr.strip().startswith("error: FLICKR_API_KEY is not set")
    assert rejected.returncode == 1
    assert rejected.stderr.strip().splitlines() == ["error: Flickr rejected the API key in FLICKR_API_KEY (Invalid API Key (Key has invalid format)); set FLICKR_API_KEY to a valid key"]


def test_a_killed_search_resumes_without_fetching_a_page_twice(tmp_path):
    entries = [{"wnid": f"c{i}", "lemmas": [f"thing{i} a", f"thing{i} b"]} for i in range(3)]
    classes = write_classes(tmp_path / "classes.json", *entries)
    config = fast_config(tmp_path / "search.yaml", per_page=10, max_images=60, target_candidates=1, requests_per_second=8)
    with FakeFlickr() as flickr:
        for e in entries:
            for lemma in e["lemmas"]:
                flickr.add_photos(lemma, 30)
        env = {"FLICKR_API_KEY": flickr.api_key}
        args = ["search", "--classes", str(classes), "--config", str(config), "--endpoint", flickr.endpoint]
        process = subprocess.Popen([sys.executable, "-m", "pipeline", *args, "--output", str(tmp_path / "out")], cwd=ROOT,
                                   env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(flickr.requests) < 7 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        first_run = len(flickr.requests)
        assert 7 <= first_run < 18 and not (tmp_path / "out" / CANDIDATES).exists()
        resumed = cli([*args, "--output", str(tmp_path / "out")], env)
        assert resumed.returncode == 0, resumed.stderr
        pages = [(r["text"], r["page"]) for r in flickr.requests]
        run_search(flickr, tmp_path / "fresh", class_list_from_entries(entries, "same"), per_page=10, max_images=60, target_candidates=1)
    # 3 classes x 2 lemmas x 3 pages; at most the page in flight at the kill is asked again
    assert len(set(pages)) == 18 and len(pages) - 18 <= 1
    resumed_records, fresh_records = read_jsonl(tmp_path / "out" / CANDIDATES), read_jsonl(tmp_path / "fresh" / CANDIDATES)
    varying = ("date_upload_our_db", "uploader")  # when and by whom (the fresh run is in-process, as "tester")
    strip = [{k: v for k, v in r.items() if k not in varying} for r in resumed_records]
    assert strip == [{k: v for k, v in r.items() if k not in varying} for r in fresh_records]
    assert len({r["id_ours"] for r in resumed_records}) == len(resumed_records) == 3 * 2 * 30
    with FakeFlickr() as empty:  # everything is stored: nothing is fetched, the records are the same
        run_search(empty, tmp_path / "out", class_list_from_entries(entries, "same"), per_page=10, max_images=60, target_candidates=1)
        assert empty.requests == []
    again = read_jsonl(tmp_path / "out" / CANDIDATES)
    assert [r["id_ours"] for r in again] == [r["id_ours"] for r in resumed_records]


def test_the_docs_show_the_default_config_and_the_command_prints_it(capsys):
    from pipeline.__main__ import main
    from pipeline.rebuild.search_config import default_config_text

    text = default_config_text()
    docs = (ROOT / "docs" / "rebuilding.md").read_text("utf-8")
    assert text[text.index("endpoint:"):].strip() in docs
    assert main(["search", "--print-config"]) == 0
    assert capsys.readouterr().out == text


def test_the_rate_limit_spaces_the_calls():
    from pipeline.rebuild.flickr import RateLimiter

    now, sleeps = [100.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limiter.wait()
    assert sleeps == [0.5, 0.5]
    assert load_search_config().requests_per_second <= 3600 / 3600  # Flickr: 3,600 calls an hour per key

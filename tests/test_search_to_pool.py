"""The front of a rebuild end to end, on a 5-class list that is not ImageNet's:
search (fake Flickr) -> download -> ingest -> selection-frequency; and candidates from a folder or a dataset."""

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_flickr import FakeFlickr, jpeg

ROOT = Path(__file__).resolve().parents[1]

CLASSES_YAML = """\
# five WordNet classes, none of them an ImageNet-1k class
- {wnid: n02121808, name: domestic cat, lemmas: [domestic cat, house cat], parent: cat}
- {wnid: n02084071, name: dog, lemmas: [dog, domestic dog], parent: canine}
- {wnid: n01503061, name: bird, lemmas: [bird], parent: vertebrate}
- {wnid: n02374451, name: horse, lemmas: [horse, Equus caballus], parent: equine}
- {wnid: n12992868, name: fungus, lemmas: [fungus], parent: organism, most_similar: [n01503061]}
"""


def cli(*args, env=None):
    done = subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def crowd_results(path, candidates, originals):
    """One task per class (its stored candidates and two originals), three workers; worker w selects
    the images whose position p has p % 3 != w. Returns the expected selection frequency per (image, wnid)."""
    expected, rows = {}, []
    for wnid in sorted({r["wnid"] for r in candidates}):
        images = [r["id_ours"] for r in candidates if r["wnid"] == wnid] + [o for o, w in originals.items() if w == wnid]
        for worker in range(3):
            selected = [image for p, image in enumerate(images) if p % 3 != worker]
            rows.append({"AssignmentId": f"A-{wnid}-{worker}", "HITId": f"H-{wnid}", "WorkerId": f"W{worker}", "AssignmentStatus": "Approved",
                         "Input.wnid": wnid, "Input.images": json.dumps(images), "Answer.selected": "|".join(selected)})
        for p, image in enumerate(images):
            expected[(image, wnid)] = sum(1 for worker in range(3) if p % 3 != worker) / 3
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return expected


def test_search_download_ingest_selection_frequency_on_five_classes(tmp_path, capsys):
    from pipeline.__main__ import main

    classes = tmp_path / "classes.yaml"
    classes.write_text(CLASSES_YAML)
    config = tmp_path / "search.yaml"
    config.write_text("target_candidates: 4\nrequests_per_second: 1000\nbackoff_seconds: 0.01\n")
    with FakeFlickr() as flickr:
        for lemma in ("domestic cat", "house cat", "dog", "domestic dog", "bird", "horse", "Equus caballus", "fungus"):
            flickr.add_photos(lemma, 2)
        flickr.add_photo("900", "dog", also_texts=("house cat",))  # found for two classes
        flickr.add_photo("901", "dog", image_status=404)
        flickr.add_photo("902", "bird", not_an_image=True)
        flickr.add_photos("bird vertebrate", 2)  # bird is short after its lemma: the parent word finds more
        env = {"FLICKR_API_KEY": flickr.api_key}
        cli("search", "--classes", classes, "--config", config, "--endpoint", flickr.endpoint, "--output", tmp_path / "search", env=env)
        records = read_jsonl(tmp_path / "search" / "candidates.jsonl")
        cli("download", tmp_path / "search" / "candidates.jsonl", "--output", tmp_path / "images", "--workers", "4", "--backoff", "0.01")
    assert {r["wnid"] for r in records} == {"n02121808", "n02084071", "n01503061", "n02374451", "n12992868"}
    assert [r["search_step"] for r in records if r["wnid"] == "n01503061"].count("parent-word") == 2
    assert len([r for r in records if r["id_search_engine"] == "900"]) == 2
    assert len(records) == 5 + 6 + 5 + 4 + 2  # cat (2 + 2 + 900), dog (2 + 900 + 901 + 2), bird (2 + 902, then 2 more), horse, fungus
    failures = read_jsonl(tmp_path / "images" / "failures.jsonl")
    assert sorted(f["kind"] for f in failures) == ["HTTP 404", "not an image"]
    stored = [r for r in records if r["id_ours"] not in {f["candidate_id"] for f in failures}]

    originals = {f"orig_{r['wnid']}_{k}.JPEG": r["wnid"] for r in records for k in range(2)}
    (tmp_path / "originals.json").write_text(json.dumps(originals))
    expected = crowd_results(tmp_path / "results.csv", stored, originals)
    ingest_args = ["--candidates", tmp_path / "search" / "candidates.jsonl", "--originals", tmp_path / "originals.json",
                   "--results", tmp_path / "results.csv", "--images", tmp_path / "images", "--output", tmp_path / "pool"]
    assert main(["ingest", *map(str, ingest_args)]) == 1  # without --classes: ImageNet-1k
    assert "must be one of the 1000 classes of the class list imagenet-1k" in capsys.readouterr().err
    done = cli("ingest", *ingest_args, "--classes", classes)
    report = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert (report["candidates"], report["failed_downloads"], report["image_files"], report["candidates_without_image"]) == (len(stored), 2, len(stored), 0)
    assert report["assignments"]["total"] == 15 and report["classes"] == "classes.yaml"
    assert main(["selection-frequency", str(tmp_path / "pool"), "--classes", str(classes)]) == 0

    pool_candidates = pq.read_table(tmp_path / "pool" / "candidates.parquet").to_pylist()
    assert sorted(r["search_step"] for r in pool_candidates if r["wnid"] == "n01503061") == ["lemmas", "lemmas", "parent-word", "parent-word"]
    images = pq.read_table(tmp_path / "pool" / "images.parquet").to_pylist()
    assert all((tmp_path / "pool" / row["path"]).is_file() and "/annotation/" in row["path"] for row in images)
    frequencies = pq.read_table(tmp_path / "pool" / "selection_frequencies.parquet").to_pylist()
    got = {(row["image_id"], row["wnid"]): row["selection_frequency"] for row in frequencies}
    assert got == pytest.approx(expected) and len(got) == len(stored) + len(originals)
    assert all(row["num_shown"] == 3 for row in frequencies)

    # ... -> sample -> build-set: a Hub-ready folder whose ClassLabel is the class list's names
    revision = tmp_path / "top.json"
    assert main(["sample", str(tmp_path / "pool"), "--rule", "top-images", "--seed", "1", "--per-class", "2", "--min-annotations", "3",
                 "--classes", str(classes), "--output", str(revision)]) == 0
    sampled = json.loads(revision.read_text())
    assert sampled["wnids"] == sorted({r["wnid"] for r in records}) and len(sampled["image_filenames"]) == 10
    assert main(["build-set", str(revision), "--pool", str(tmp_path / "pool"), "--classes", str(classes), "--output", str(tmp_path / "built")]) == 0
    import datasets

    built = datasets.load_dataset(str(tmp_path / "built" / "hub"), "top-images", split="test")
    assert built.features["label"].names == ["bird", "dog", "domestic cat", "horse", "fungus"]  # sorted ids: n01503061 < n02084071 < ...
    assert built.num_rows == 10 and sorted(zip(built["candidate_id"], built["wnid"])) == sorted(map(tuple, sampled["image_filenames"]))
    assert all(built.features["label"].names[label] == {"n01503061": "bird", "n02084071": "dog", "n02121808": "domestic cat", "n02374451": "horse",
                                                        "n12992868": "fungus"}[wnid] for label, wnid in zip(built["label"], built["wnid"]))
    assert built[0]["image"].size[0] <= 500


def tiny_jpeg(shade):
    return jpeg((16, 12), (shade, 10, 10))


def class_folders(root):
    (root / "n02121808").mkdir(parents=True)
    (root / "n02084071" / "more").mkdir(parents=True)
    (root / "n02121808" / "a.jpg").write_bytes(tiny_jpeg(10))
    (root / "n02121808" / "b.jpg").write_bytes(tiny_jpeg(20))
    (root / "n02121808" / "b-copy.jpg").write_bytes(tiny_jpeg(20))  # same bytes twice in one class: one candidate
    (root / "n02121808" / "shared.jpg").write_bytes(tiny_jpeg(30))
    (root / "n02084071" / "shared.jpg").write_bytes(tiny_jpeg(30))  # same bytes in two classes
    (root / "n02084071" / "more" / "c.png").write_bytes(_png())
    (root / "n02084071" / "broken.jpg").write_bytes(b"<html>oops</html>")
    (root / "n02084071" / "notes.txt").write_text("not an image file name")


def _png():
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (10, 10), (0, 200, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def expected_ids(root):
    sha = lambda p: hashlib.sha1((root / p).read_bytes()).hexdigest()  # noqa: E731
    shared = sha("n02121808/shared.jpg")
    return {
        (sha("n02121808/a.jpg"), "n02121808"), (sha("n02121808/b.jpg"), "n02121808"),
        (hashlib.sha1(f"{shared},n02121808".encode()).hexdigest(), "n02121808"),
        (hashlib.sha1(f"{shared},n02084071".encode()).hexdigest(), "n02084071"),
        (sha("n02084071/more/c.png"), "n02084071"),
    }


def test_candidates_from_a_folder_and_a_dataset_have_stable_ids_and_ingest(tmp_path):
    classes = tmp_path / "classes.yaml"
    classes.write_text(CLASSES_YAML)
    class_folders(tmp_path / "photos")
    done = cli("search", "--classes", classes, "--from-folder", tmp_path / "photos", "--output", tmp_path / "from_folder")
    counts = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert counts == {"candidates": 5, "not_images": 1, "repeated_in_class": 1, "classes": 2}
    records = read_jsonl(tmp_path / "from_folder" / "candidates.jsonl")
    assert {(r["id_ours"], r["wnid"]) for r in records} == expected_ids(tmp_path / "photos")
    assert {r["search_engine"] for r in records} == {"folder"}
    assert sorted(r["source"] for r in records if "also_found_for" in r) == ["n02084071/shared.jpg", "n02121808/shared.jpg"]

    from pipeline.__main__ import main

    shutil.copytree(tmp_path / "photos", tmp_path / "flat")  # imagefolder infers labels only from files at one depth
    (tmp_path / "flat" / "n02084071" / "more" / "c.png").rename(tmp_path / "flat" / "n02084071" / "c.png")
    (tmp_path / "flat" / "n02084071" / "more").rmdir()
    assert main(["search", "--classes", str(classes), "--from-dataset", str(tmp_path / "flat"), "--output", str(tmp_path / "from_dataset")]) == 0
    from_dataset = read_jsonl(tmp_path / "from_dataset" / "candidates.jsonl")
    assert {(r["id_ours"], r["wnid"]) for r in from_dataset} == expected_ids(tmp_path / "photos")

    originals = {"orig_1.JPEG": "n02121808"}
    (tmp_path / "originals.json").write_text(json.dumps(originals))
    crowd_results(tmp_path / "results.csv", records, originals)
    cli("ingest", "--candidates", tmp_path / "from_folder" / "candidates.jsonl", "--originals", tmp_path / "originals.json",
        "--results", tmp_path / "results.csv", "--images", tmp_path / "from_folder" / "images", "--output", tmp_path / "pool", "--classes", classes)
    assert pq.read_table(tmp_path / "pool" / "images.parquet").num_rows == 5


def test_folder_names_must_be_classes_of_the_list(tmp_path):
    classes = tmp_path / "classes.yaml"
    classes.write_text(CLASSES_YAML)
    (tmp_path / "photos" / "n99999999").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "pipeline", "search", "--classes", str(classes), "--from-folder", str(tmp_path / "photos"),
                           "--output", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "'n99999999'" in done.stderr and "not in the class list" in done.stderr

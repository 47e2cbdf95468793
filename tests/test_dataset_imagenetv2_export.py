"""The ImageNetV2 Hub-ready export and `python -m imagenetv2 build`, on synthetic archives in the release
layout (moved from test_imagenetv2.py; expected values from the released files, as there)."""

from __future__ import annotations

import json
import subprocess
import sys

import datasets
import yaml

from imagenetv2 import CONFIG_NAMES
from test_imagenetv2 import REVISION_OF, released_pairs, search_records


# --- export: the Hub-ready folder ----------------------------------------------------------------


def test_exported_folder_loads_with_the_same_rows_and_features(imagenetv2_hub_folder, imagenetv2_datasets):
    for config in CONFIG_NAMES:
        loaded = datasets.load_dataset(str(imagenetv2_hub_folder), config, split="test")
        built = imagenetv2_datasets[config]
        assert loaded.features == built.features
        assert loaded.num_rows == built.num_rows == 10_000
        columns = [c for c in built.column_names if c != "image"]
        assert loaded.select_columns(columns).to_dict() == built.select_columns(columns).to_dict()
        raw = loaded.cast_column("image", datasets.Image(decode=False)).select(range(0, 10_000, 500))
        original = built.cast_column("image", datasets.Image(decode=False)).select(range(0, 10_000, 500))
        assert [r["bytes"] for r in raw["image"]] == [r["bytes"] for r in original["image"]]


def test_exported_folder_loads_by_bare_name_from_its_parent_and_streams(imagenetv2_hub_folder, monkeypatch):
    monkeypatch.chdir(imagenetv2_hub_folder.parent)
    by_name = datasets.load_dataset("imagenetv2", "top-images", split="test")
    assert by_name.num_rows == 10_000
    default = datasets.load_dataset("imagenetv2", split="test")  # the card's default config
    assert default[0]["candidate_id"] in {cid for cid, _ in released_pairs("matched-frequency")}
    stream = datasets.load_dataset("imagenetv2", "threshold-0.7", split="test", streaming=True)
    first = list(stream.take(3))
    eager = datasets.load_dataset("imagenetv2", "threshold-0.7", split="test").select(range(3))
    assert [r["candidate_id"] for r in first] == list(eager["candidate_id"])
    assert first[0]["image"].format == "JPEG" and stream.features["label"].names[134] == "crane (bird)"


def test_dataset_card(imagenetv2_hub_folder):
    text = (imagenetv2_hub_folder / "README.md").read_text()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["license"] == "mit" and meta["pretty_name"] == "ImageNetV2"
    assert meta["task_categories"] == ["image-classification"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert set(configs) == set(CONFIG_NAMES)
    assert configs["matched-frequency"].get("default") is True and "default" not in configs["top-images"]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["threshold-0.7"]["splits"][0]["num_examples"] == 10_000
    label = next(f for f in infos["top-images"]["features"] if f["name"] == "label")
    assert label["dtype"]["class_label"]["names"]["134"] == "crane (bird)"
    for phrase in ("ImageFolder", "crane (machine)", "@inproceedings{recht2019imagenet", "MatchedFrequency", "selection frequency"):
        assert phrase in body
    records = search_records()
    with_metadata = sum(cid in records for cid, _ in released_pairs("top-images"))
    assert f"| `top-images` | 10,000 | {with_metadata:,} |" in body
    for config in CONFIG_NAMES:
        revision = json.loads((imagenetv2_hub_folder / "revisions" / f"{config}.json").read_text())
        assert revision["output_filename"] == f"{REVISION_OF[config]}.json"


def test_build_command_writes_the_folder_atomically(tmp_path, imagenetv2_archive_dir):
    data_dir, _ = imagenetv2_archive_dir
    out = tmp_path / "out" / "imagenetv2"
    def command(data=data_dir, *more):
        return [sys.executable, "-m", "imagenetv2", "build", "--config", "top-images", "--data-dir", str(data),
                "--output", str(out), "--cache-dir", str(tmp_path / "cache"), *more]

    # the synthetic archive is not the pinned release: verification refuses it, nothing is written
    failed = subprocess.run(command(), capture_output=True, text=True, cwd=tmp_path)
    assert failed.returncode == 1 and "checksum mismatch" in failed.stderr and not out.exists()
    done = subprocess.run(command(data_dir, "--no-verify"), capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".imagenetv2-hf.json", "CITATIONS.bib", "README.md", "data", "revisions"]
    assert datasets.load_dataset(str(out), "top-images", split="test").num_rows == 10_000
    # a failing re-run leaves the previous folder untouched and no temporary folder behind
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = subprocess.run(command(tmp_path / "nowhere", "--no-verify"), capture_output=True, text=True)
    assert again.returncode == 1 and "not a folder" in again.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in out.parent.iterdir()] == ["imagenetv2"]


def test_export_refuses_to_replace_a_folder_it_did_not_write(tmp_path, imagenetv2_archive_dir):
    data_dir, _ = imagenetv2_archive_dir
    precious = tmp_path / "imagenetv2"
    precious.mkdir()
    (precious / "builder.py").write_text("# someone's code")
    result = subprocess.run(
        [sys.executable, "-m", "imagenetv2", "build", "--config", "top-images", "--data-dir", str(data_dir),
         "--output", str(precious), "--cache-dir", str(tmp_path / "cache"), "--no-verify"],
        capture_output=True, text=True,
    )
    assert result.returncode == 1 and "refusing to replace" in result.stderr
    assert (precious / "builder.py").read_text() == "# someone's code"

"""CIFAR-10.1 export and download: the Hub-ready folder, its card, the command, and a real download.

The download test serves the files from a local HTTP server on loopback and points the table's
URL base at it, so the datasets download manager runs for real without the internet.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import datasets
import numpy as np
import pytest
import yaml

import cifar10_1.variants
from cifar10_1 import PACKAGE, Cifar10_1, cifar10_1_features
from fixtures_cifar10_1 import cifar10_1_checksums, cifar10_1_data_dir, cifar10_1_hub_folder  # noqa: F401 (fixtures)
from fixtures_cifar10_1 import write_cifar10_1_files
from pipeline.core.build_command import main
from pipeline.core.export import read_card
from pipeline.core.integrity import ChecksumError
from pipeline.core.ownership import write_marker

EXPECTED_CLASS_COUNTS = {"v4": [208, 212, 202, 212, 204, 218, 192, 210, 161, 202], "v6": [200] * 10}
REPO_ROOT = Path(__file__).resolve().parents[1]


def builder_dataset(config, data_dir, cache_dir, checksums):
    builder = Cifar10_1(config_name=config, data_dir=str(data_dir), cache_dir=str(cache_dir), checksums=checksums)
    builder.download_and_prepare()
    return builder.as_dataset(split="test")


def undecoded(ds: datasets.Dataset) -> dict:
    return ds.cast_column("image", datasets.Image(decode=False)).to_dict()


# --- the Hub-ready folder ------------------------------------------------------------------------


def test_hub_folder_layout(cifar10_1_hub_folder):
    files = sorted(str(p.relative_to(cifar10_1_hub_folder)) for p in cifar10_1_hub_folder.rglob("*") if p.is_file())
    assert files == [
        ".imagenetv2-hf.json",  # the marker: a later build may replace this folder
        "CITATIONS.bib",
        "README.md",
        "data/v4/test-00000-of-00001.parquet",
        "data/v6/test-00000-of-00001.parquet",
    ]
    assert not [p for p in cifar10_1_hub_folder.parent.iterdir() if p.name.startswith(".hub.")]  # no temporary left


@pytest.mark.parametrize("config", ["v6", "v4"])
def test_exported_folder_gives_the_builders_rows(
    config, cifar10_1_hub_folder, cifar10_1_data_dir, cifar10_1_checksums, tmp_path
):
    loaded = datasets.load_dataset(str(cifar10_1_hub_folder), config, split="test", cache_dir=str(tmp_path / "load"))
    built = builder_dataset(config, cifar10_1_data_dir, tmp_path / "build", cifar10_1_checksums)
    assert loaded.features == built.features == cifar10_1_features()
    assert undecoded(loaded) == undecoded(built)  # same rows, same PNG bytes, same order
    assert np.bincount(list(loaded["label"]), minlength=10).tolist() == EXPECTED_CLASS_COUNTS[config]
    released = np.load(cifar10_1_data_dir / f"cifar10.1_{config}_data.npy", allow_pickle=False)
    assert np.array_equal(np.stack([np.asarray(im) for im in loaded["image"]]), released)


def test_default_config_is_v6(cifar10_1_hub_folder, tmp_path):
    ds = datasets.load_dataset(str(cifar10_1_hub_folder), split="test", cache_dir=str(tmp_path / "load"))
    assert ds.num_rows == 2000


def test_card_yaml(cifar10_1_hub_folder):
    card = read_card(cifar10_1_hub_folder)
    meta = yaml.safe_load((cifar10_1_hub_folder / "README.md").read_text().split("---")[1])
    assert meta["license"] == "mit"
    assert meta["pretty_name"] == "CIFAR-10.1"
    assert meta["task_categories"] == ["image-classification"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs["v6"].get("default") is True and "default" not in configs["v4"]
    assert configs["v4"]["data_files"] == [{"split": "test", "path": "data/v4/test-*"}]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert {n: i["splits"][0]["num_examples"] for n, i in infos.items()} == {"v6": 2000, "v4": 2021}
    label = next(f for f in infos["v4"]["features"] if f["name"] == "label")
    assert list(label["dtype"]["class_label"]["names"].values())[:2] == ["airplane", "automobile"]
    assert card.data.license == "mit"


def test_card_prose(cifar10_1_hub_folder):
    text = read_card(cifar10_1_hub_folder).text
    # the configs table is computed from the exported rows
    assert "| `v4` | 2,021 | 208 | 212 | 202 | 212 | 204 | 218 | 192 | 210 | 161 | 202 |" in text
    assert "| `v6` (default) | 2,000 | " + " | ".join(["200"] * 10) + " |" in text
    assert "share 1,874 Tiny Images indices" in text
    for phrase in [
        "161 ships",  # v4's imbalance
        "recommended",
        "June 2020",
        "withdrew",
        "inherits this\nprovenance",
        "uoft-cs/cifar10",
        'rename_column("image", "img")',
        'load_dataset(REPO, "v4", split="test")',
        "@article{recht2018cifar10.1",
        "@inproceedings{recht2019imagenet",
        "@article{torralba2008tinyimages",
        "arXiv:1806.00451",
        "cruiser_good_indices.json",
    ]:
        assert phrase in text, phrase
    assert (cifar10_1_hub_folder / "CITATIONS.bib").read_text() in text


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_command_builds_a_folder(cifar10_1_data_dir, tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "cifar10_1", "build", "--config", "v4", "--data-dir", str(cifar10_1_data_dir),
         "--output", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-verify"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}"
    assert "Generating test split" in result.stderr  # the progress bar
    ds = datasets.load_dataset(str(out), "v4", split="test", cache_dir=str(tmp_path / "load"))
    assert ds.num_rows == 2021 and list(ds["keyword"])[0] == "leopard_frog"


def test_command_fails_cleanly_and_keeps_the_previous_output(cifar10_1_data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("previous export")
    write_marker(out, "cifar10_1 build")  # a previous export of this project, which a build may replace
    code = main(PACKAGE, ["build", "--config", "v6", "--data-dir", str(cifar10_1_data_dir),
                          "--output", str(out), "--cache-dir", str(tmp_path / "cache")])
    assert code == 1
    err = capsys.readouterr().err
    assert "error: checksum mismatch" in err and "cifar10.1_v6_data.npy" in err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    assert (out / "README.md").read_text() == "previous export"
    code = main(PACKAGE, ["build", "--config", "v5", "--output", str(out), "--cache-dir", str(tmp_path / "cache")])
    assert code == 1 and "unknown CIFAR-10.1 config 'v5'" in capsys.readouterr().err


# --- downloading from the pinned URL (a local server stands in for GitHub) --------------------------


class _Server:
    def __init__(self, folder: Path):
        self.requests: list[tuple[str, str]] = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send_head(self):
                log.append((self.command, self.path))
                return super().send_head()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def gets(self) -> list[str]:
        return sorted(p for c, p in self.requests if c == "GET")


@pytest.fixture
def github(tmp_path, monkeypatch):
    """The released files (synthetic images) served over HTTP at .../raw/<commit>/datasets/<file>."""
    commit = cifar10_1.variants.GITHUB_COMMIT
    folder = tmp_path / "served"
    files = write_cifar10_1_files(folder / "raw" / commit / "datasets", "v4", rng_seed=7)
    server = _Server(folder)
    server.thread.start()
    monkeypatch.setattr(cifar10_1.variants, "RAW_BASE_URL", f"{server.url}/raw/{commit}/datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # loopback is not the internet
    yield server, files, folder / "raw" / commit / "datasets"
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.mark.integration
def test_download_from_the_pinned_url_is_verified_and_cached(github, tmp_path):
    server, checksums, served = github
    cache = tmp_path / "cache"
    builder = Cifar10_1(config_name="v4", cache_dir=str(cache), checksums=checksums)
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")
    commit = cifar10_1.variants.GITHUB_COMMIT
    assert server.gets() == [f"/raw/{commit}/datasets/cifar10.1_v4_data.npy", f"/raw/{commit}/datasets/cifar10.1_v4_labels.npy"]
    released = np.load(served / "cifar10.1_v4_data.npy", allow_pickle=False)
    assert np.array_equal(np.stack([np.asarray(im) for im in ds["image"]]), released)
    assert ds.num_rows == 2021 and np.bincount(list(ds["label"]), minlength=10).tolist() == EXPECTED_CLASS_COUNTS["v4"]

    # regenerating the dataset reuses the downloaded files: no new request
    again = Cifar10_1(config_name="v4", cache_dir=str(cache), checksums=checksums)
    again.download_and_prepare(download_mode="reuse_cache_if_exists")
    assert len(server.gets()) == 2
    assert undecoded(again.as_dataset(split="test")) == undecoded(ds)


@pytest.mark.integration
def test_download_of_other_bytes_fails_verification(github, tmp_path):
    server, checksums, served = github
    cache = tmp_path / "cache"
    builder = Cifar10_1(config_name="v4", cache_dir=str(cache))  # the pinned checksums: the served files differ
    with pytest.raises(ChecksumError, match="expected sha256 5aaedc268df8.*force_redownload"):
        builder.download_and_prepare()
    assert [p for pattern in ("dataset_info.json", "*.arrow", "*.incomplete") for p in cache.rglob(pattern)] == []

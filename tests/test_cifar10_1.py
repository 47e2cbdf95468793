"""CIFAR-10.1: the table, the keyword derivation on the real metadata, and the builder.

The builder runs on synthetic image arrays beside the real label files (tests/data, which match
the pinned sha256), so row counts, class counts and keywords are those of the release. Expected
counts are quoted from the release notes (issue 3 / NOTES.md), not computed from the code.
"""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
import pickle
import shutil
from collections import Counter
from importlib import resources
from pathlib import Path

import datasets
import numpy as np
import pytest

from cifar10_1 import CLASS_NAMES, CONFIG_NAMES, VARIANTS, Cifar10_1, cifar10_1_features, get_variant
from cifar10_1.provenance import KEYWORD_DERIVATIONS, V6Metadata, keyword_counts, ti_indices, v6_keywords
from fixtures_cifar10_1 import LABELS_DIR, checksum_of
from fixtures_cifar10_1 import cifar10_1_checksums, cifar10_1_data_dir  # noqa: F401 (fixtures, also without conftest)
from pipeline.core.integrity import ChecksumError, verify_file

# From the release (NOTES.md, the CIFAR-10.1 README and paper).
EXPECTED_ROWS = {"v4": 2021, "v6": 2000}
EXPECTED_CLASS_COUNTS = {"v4": [208, 212, 202, 212, 204, 218, 192, 210, 161, 202], "v6": [200] * 10}
SHARED_TI_INDICES = 1874


def metadata(name):
    return json.loads(resources.files("cifar10_1").joinpath("data", name).read_text("utf-8"))


def real_labels(version):
    return np.load(LABELS_DIR / f"cifar10.1_{version}_labels.npy", allow_pickle=False)


def build(config, data_dir, cache_dir, **kwargs):
    builder = Cifar10_1(config_name=config, data_dir=str(data_dir), cache_dir=str(cache_dir), **{
        k: v for k, v in kwargs.items() if k == "checksums"
    })
    builder.download_and_prepare(**{k: v for k, v in kwargs.items() if k != "checksums"})
    return builder.as_dataset(split="test")


def assert_nothing_built(cache_dir: Path):
    left = [p for pattern in ("dataset_info.json", "*.arrow", "*.incomplete") for p in Path(cache_dir).rglob(pattern)]
    assert left == [], f"a failed build left {left}"


def copy_files(src: Path, dst: Path, version: str) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in get_variant(version).files.values():
        shutil.copyfile(src / f.name, dst / f.name)
    return dst


# --- the table -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.config_name)
def test_pinned_label_checksums_match_the_real_label_files(variant):
    verify_file(LABELS_DIR / variant.labels.name, variant.labels)  # raises on mismatch
    labels = real_labels(variant.config_name)
    assert labels.dtype == np.int32
    assert len(labels) == variant.num_examples == EXPECTED_ROWS[variant.config_name]
    assert np.bincount(labels, minlength=10).tolist() == list(variant.class_counts)


def test_table_urls_are_at_the_pinned_commit():
    v6 = get_variant("v6")
    assert v6.url(v6.images) == (
        "https://github.com/modestyachts/CIFAR-10.1/raw/d9982abb0bfc4846b8d13a11e66b887d946205d0/"
        "datasets/cifar10.1_v6_data.npy"
    )
    assert CONFIG_NAMES == ("v6", "v4") and Cifar10_1.DEFAULT_CONFIG_NAME == "v6"
    assert set(KEYWORD_DERIVATIONS) == set(CONFIG_NAMES)


@pytest.mark.parametrize("name, hint", [("cifar10.1_v4", "'v4'"), ("6", "'v6'"), ("v5", None)])
def test_unknown_config_is_refused_with_the_right_name(name, hint):
    with pytest.raises(ValueError, match="unknown CIFAR-10.1 config") as info:
        Cifar10_1(config_name=name)
    assert ("did you mean " + hint in str(info.value)) if hint else "did you mean" not in str(info.value)
    assert "'v6', 'v4'" in str(info.value)


@pytest.mark.parametrize(
    "module",
    ["cifar10_1", "cifar10_1.variants", "cifar10_1.arrays", "cifar10_1.provenance", "cifar10_1.release",
     "cifar10_1.features", "cifar10_1.card"],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_default_config_is_v6(tmp_path):
    assert Cifar10_1(cache_dir=str(tmp_path)).config.name == "v6"


def test_label_names_are_cifar10s_in_cifar10s_order():
    assert cifar10_1_features()["label"].names == [
        "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
    ]


# --- keywords from the real metadata --------------------------------------------------------------


def test_v4_keywords_follow_the_per_keyword_lists():
    per_keyword = metadata("cifar10.1_v4_ti_indices_per_keyword.json")
    keywords = KEYWORD_DERIVATIONS["v4"](ti_indices("v4"), real_labels("v4"))
    assert len(keywords) == 2021
    assert keywords[0] == "leopard_frog" and CLASS_NAMES[real_labels("v4")[0]] == "frog"
    runs = [(k, sum(1 for _ in g)) for k, g in itertools.groupby(keywords)]
    assert runs == [(k, len(v)) for k, v in per_keyword.items() if v]  # a few keywords list no image


def test_v6_keywords_reproduce_the_released_keyword_counts():
    labels = real_labels("v6")
    keywords = v6_keywords(ti_indices("v6"), labels)
    assert len(keywords) == 2000 and all(keywords)
    assert keyword_counts(keywords, labels) == metadata("keyword_counts_v6.json")
    pool = metadata("tinyimage_good_indices_subselected_v6.json")
    assert all(i in set(pool[k]) for i, k in zip(ti_indices("v6"), keywords))


def test_v6_cruiser_images_are_split_between_automobile_and_ship():
    labels = real_labels("v6")
    indices = ti_indices("v6")
    keywords = v6_keywords(indices, labels)
    cruisers = [(CLASS_NAMES[l], i) for i, l, k in zip(indices, labels, keywords) if k == "cruiser"]
    assert Counter(c for c, _ in cruisers) == {"automobile": 2, "ship": 1}
    separation = metadata("cruiser_good_indices.json")
    assert all(i in separation[c] for c, i in cruisers)


def test_v4_and_v6_agree_on_the_keywords_of_shared_images():
    v4 = dict(zip(ti_indices("v4"), KEYWORD_DERIVATIONS["v4"](ti_indices("v4"), real_labels("v4"))))
    v6 = dict(zip(ti_indices("v6"), v6_keywords(ti_indices("v6"), real_labels("v6"))))
    shared = set(v4) & set(v6)
    assert len(shared) == SHARED_TI_INDICES
    assert [i for i in shared if v4[i] != v6[i]] == []


def test_v6_keywords_fail_when_labels_do_not_match_the_metadata():
    labels = real_labels("v6").copy()
    labels[0] = 9  # an airplane relabelled truck: its keyword is not a truck keyword
    with pytest.raises(ValueError, match=r"1 image\(s\) have no keyword of their class: #0 \(Tiny Images 67573998, truck\)"):
        v6_keywords(ti_indices("v6"), labels)


def test_v6_keyword_ambiguity_is_resolved_by_counts_or_refused():
    counts = {"airplane": {"airbus": 1, "jet": 1}}
    resolved = v6_keywords([5, 7], [0, 0], V6Metadata({"airbus": [5, 7], "jet": [7]}, counts, {}))
    assert resolved == ["airbus", "jet"]  # 5 can only be airbus, which uses up airbus's one image
    counts = {"airplane": {"airbus": 1, "jet": 1}}
    with pytest.raises(ValueError, match=r"2 image\(s\) have several possible keywords"):
        v6_keywords([5, 7], [0, 0], V6Metadata({"airbus": [5, 7], "jet": [5, 7]}, counts, {}))
    with pytest.raises(ValueError, match="derived v6 keyword counts differ.*airplane/airbus: derived 2, expected 1"):
        v6_keywords([5, 7], [0, 0], V6Metadata({"airbus": [5, 7]}, {"airplane": {"airbus": 1}}, {}))
    shared = {"airplane": {"cruiser": 1}, "ship": {"cruiser": 1}}
    with pytest.raises(ValueError, match=r"keywords \['cruiser'\] belong to several classes"):
        v6_keywords([5, 7], [0, 8], V6Metadata({"cruiser": [5, 7]}, shared, {}))
    separated = V6Metadata({"cruiser": [5, 7]}, shared, {"cruiser": {"airplane": [5], "ship": [7]}})
    assert v6_keywords([5, 7], [0, 8], separated) == ["cruiser", "cruiser"]
    with pytest.raises(ValueError, match="no keyword of their class"):
        v6_keywords([7, 5], [0, 8], separated)


# --- the builder ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["v6", "v4"])
def test_builder_rows_counts_provenance_and_lossless_images(config, cifar10_1_data_dir, cifar10_1_checksums, tmp_path):
    ds = build(config, cifar10_1_data_dir, tmp_path / "cache", checksums=cifar10_1_checksums)
    assert ds.num_rows == EXPECTED_ROWS[config]
    assert ds.features == cifar10_1_features()
    labels = np.asarray(list(ds["label"]))
    assert np.bincount(labels, minlength=10).tolist() == EXPECTED_CLASS_COUNTS[config]
    assert np.array_equal(labels, real_labels(config))
    assert list(ds["index"]) == list(range(EXPECTED_ROWS[config]))
    assert list(ds["ti_index"]) == metadata(f"cifar10.1_{config}_ti_indices.json")
    keywords = list(ds["keyword"])
    assert all(isinstance(k, str) and k for k in keywords)
    if config == "v6":
        assert keyword_counts(keywords, labels) == metadata("keyword_counts_v6.json")
    else:
        per_keyword = metadata("cifar10.1_v4_ti_indices_per_keyword.json")
        assert keywords == [k for k, lst in per_keyword.items() for _ in lst]
    released = np.load(cifar10_1_data_dir / get_variant(config).images.name, allow_pickle=False)
    decoded = [im for im in ds["image"]]
    assert {(im.mode, im.size, im.format) for im in decoded} == {("RGB", (32, 32), "PNG")}
    assert np.array_equal(np.stack([np.asarray(im) for im in decoded]), released)  # every row, byte for byte


def test_pinned_checksums_refuse_other_bytes_in_data_dir(cifar10_1_data_dir, tmp_path):
    with pytest.raises(ChecksumError, match="checksum mismatch.*cifar10.1_v4_data.npy.*5aaedc268df8f4cf"):
        build("v4", cifar10_1_data_dir, tmp_path / "cache")  # the synthetic images are not the release
    assert_nothing_built(tmp_path / "cache")


def test_tampered_file_fails_verification_and_no_checks_builds_it(cifar10_1_data_dir, cifar10_1_checksums, tmp_path):
    folder = copy_files(cifar10_1_data_dir, tmp_path / "files", "v6")
    path = folder / "cifar10.1_v6_data.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # the last pixel's blue channel: still a valid array, other bytes
    path.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match=f"{path}.*expected sha256 {cifar10_1_checksums[path.name].sha256}"):
        build("v6", folder, tmp_path / "cache", checksums=cifar10_1_checksums)
    assert_nothing_built(tmp_path / "cache")

    ds = build("v6", folder, tmp_path / "cache", checksums=cifar10_1_checksums, verification_mode="no_checks")
    original = np.load(cifar10_1_data_dir / path.name, allow_pickle=False)[-1]
    expected = original.copy()
    expected[-1, -1, 2] ^= 0xFF
    assert not np.array_equal(expected, original)
    assert np.array_equal(np.asarray(ds[-1]["image"]), expected)


def invalid_file_cases():
    """(name, version, file to replace, array or bytes to write there, expected error)."""
    n4 = 2021
    rng = np.random.default_rng(1)
    images = lambda shape, dtype=np.uint8: rng.integers(0, 256, size=shape).astype(dtype)  # noqa: E731
    labels = np.load(LABELS_DIR / "cifar10.1_v4_labels.npy", allow_pickle=False)
    out_of_range = labels.copy()
    out_of_range[[3, 10]] = [10, -1]
    return [
        ("pickled object array", "images", np.array([{"image": 1}], dtype=object), "holds pickled Python objects"),
        ("raw pickle", "labels", pickle.dumps(labels.tolist(), protocol=4), "is a Python pickle"),
        ("not npy", "labels", b"label,0\n", "is not a .npy file"),
        ("fewer images than labels", "images", images((n4 - 1, 32, 32, 3)), "holds 2020 images but cifar10.1_v4_labels.npy holds 2021 labels"),
        ("float images", "images", images((n4, 32, 32, 3), np.float32), "has dtype float32, but CIFAR-10.1 images are uint8"),
        ("channels first", "images", images((n4, 3, 32, 32)), r"has shape \(2021, 3, 32, 32\), but CIFAR-10.1 images are an array of shape \(N, 32, 32, 3\)"),
        ("flat images", "images", images((n4, 3072)), r"has shape \(2021, 3072\)"),
        ("labels out of range", "labels", out_of_range, "2 label\\(s\\) outside 0-9 \\(10 at position 3, -1 at position 10\\)"),
        ("float labels", "labels", labels.astype(np.float64), "has dtype float64, but CIFAR-10.1 labels are integers"),
        ("2-d labels", "labels", labels.reshape(-1, 1), r"has shape \(2021, 1\), but CIFAR-10.1 labels are a 1-D array"),
        ("one label and image short", "both", None, "hold 2020 images, but CIFAR-10.1 v4 has 2021"),
    ]


@pytest.mark.parametrize("case", invalid_file_cases(), ids=lambda c: c[0])
def test_invalid_files_get_a_clear_error_and_nothing_is_built(case, cifar10_1_data_dir, cifar10_1_checksums, tmp_path):
    _, role, content, message = case
    folder = copy_files(cifar10_1_data_dir, tmp_path / "files", "v4")
    variant = get_variant("v4")
    if role == "both":
        for f in (variant.images, variant.labels):
            np.save(folder / f.name, np.load(folder / f.name, allow_pickle=False)[:-1])
    else:
        path = folder / variant.files[role].name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            with open(path, "wb") as f:  # np.save would add .npy to a name without it; keep the name
                np.save(f, content, allow_pickle=True)
    # the bad files pass verification (their own checksums), so the loader's checks are what refuse them
    checksums = dict(cifar10_1_checksums) | {p.name: checksum_of(p) for p in folder.iterdir()}
    with pytest.raises(ValueError, match=message):
        build("v4", folder, tmp_path / "cache", checksums=checksums)
    assert_nothing_built(tmp_path / "cache")


def test_missing_file_in_data_dir_names_it_and_where_to_get_it(cifar10_1_data_dir, tmp_path):
    folder = copy_files(cifar10_1_data_dir, tmp_path / "files", "v4")
    (folder / "cifar10.1_v4_labels.npy").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks cifar10.1_v4_labels.npy .*raw/d9982abb.*/datasets/cifar10.1_v4_labels.npy"):
        build("v4", folder, tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        build("v4", tmp_path / "nowhere", tmp_path / "cache")
    assert_nothing_built(tmp_path / "cache")


def test_checksum_override_must_name_a_released_file(cifar10_1_data_dir, cifar10_1_checksums, tmp_path):
    wrong = {"cifar10.1_v4_data": cifar10_1_checksums["cifar10.1_v4_data.npy"]}
    with pytest.raises(ValueError, match="'cifar10.1_v4_data', which is not a released CIFAR-10.1 file"):
        build("v4", cifar10_1_data_dir, tmp_path / "cache", checksums=wrong)


def test_second_build_reuses_the_cache(cifar10_1_data_dir, cifar10_1_checksums, tmp_path):
    first = build("v4", cifar10_1_data_dir, tmp_path / "cache", checksums=cifar10_1_checksums)
    arrow = sorted((tmp_path / "cache").rglob("*.arrow"))
    mtimes = [p.stat().st_mtime_ns for p in arrow]
    second = build("v4", cifar10_1_data_dir, tmp_path / "cache", checksums=cifar10_1_checksums)
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "cache").rglob("*.arrow"))] == mtimes
    assert second._fingerprint == first._fingerprint
    assert isinstance(second, datasets.Dataset) and second.num_rows == 2021

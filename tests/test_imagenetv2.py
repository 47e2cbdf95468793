"""The ImageNetV2 builder and its export, on synthetic archives in the exact release layout.

Expected values come from the released files, read here independently of the package code:
``class_info.json`` (class index ↔ wnid), the revision lists ``imagenetv2-{b-33,a-44,c-12}.json``
and ``candidates_in_final_sets.jsonl`` (search records).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import tarfile
from pathlib import Path

import datasets
import pytest

from fixtures_imagenetv2 import Entry, release_entries, synthetic_jpeg, write_imagenetv2_archive
from imagenetv2 import CONFIG_NAMES, VARIANTS, ImageNetV2, get_variant
from imagenetv2.archive import ArchiveError, LegacyReleaseError
from pipeline.core.integrity import ChecksumError, FileChecksum

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "imagenetv2" / "data"
CLASS_INFO = json.loads((DATA / "class_info.json").read_text())
WNID_OF_INDEX = {c["cid"]: c["wnid"] for c in CLASS_INFO}
REVISION_OF = {"matched-frequency": "imagenetv2-b-33", "threshold-0.7": "imagenetv2-a-44", "top-images": "imagenetv2-c-12"}


def released_pairs(config: str) -> set[tuple[str, str]]:
    revision = json.loads((DATA / f"{REVISION_OF[config]}.json").read_text())
    return {tuple(p) for p in revision["image_filenames"]}


def search_records() -> dict[str, dict]:
    lines = (DATA / "candidates_in_final_sets.jsonl").read_text().splitlines()
    return {r["id_ours"]: r for r in map(json.loads, lines)}


def build(data_dir, cache_dir, config="matched-frequency", verification_mode="basic_checks", **kwargs) -> datasets.Dataset:
    builder = ImageNetV2(config_name=config, data_dir=str(data_dir), cache_dir=str(cache_dir), **kwargs)
    builder.download_and_prepare(verification_mode=verification_mode)
    return builder.as_dataset(split="test")


def assert_nothing_built(cache_dir: Path) -> None:
    """After a failed build: no dataset in the cache and no half-written folder."""
    leftovers = [p for p in cache_dir.rglob("*") if p.name.endswith(".incomplete") or p.name == "dataset_info.json"]
    assert leftovers == []


# --- the variants table and config names -----------------------------------------------------


def test_variants_table_matches_the_release_notes():
    """Values from NOTES.md: archive names, sizes, sha256 and revisions of the current release."""
    assert CONFIG_NAMES == ("matched-frequency", "threshold-0.7", "top-images")
    by_name = {v.config_name: v for v in VARIANTS}
    assert by_name["matched-frequency"].archive.size == 1264079360
    assert by_name["threshold-0.7"].archive.sha256.startswith("32142bfe998f")
    assert by_name["top-images"].archive.name == "imagenetv2-top-images.tar.gz"
    for v in VARIANTS:
        assert v.url == f"https://huggingface.co/datasets/vaishaal/ImageNetV2/resolve/d626240be2538720e83103a0e1178d24aca8b12c/{v.archive.name}"
        assert v.revision == REVISION_OF[v.config_name]
    assert ImageNetV2.DEFAULT_CONFIG_NAME == "matched-frequency"


@pytest.mark.parametrize(
    "spelling, right",
    [("threshold0.7", "threshold-0.7"), ("topimages", "top-images"), ("matched_frequency", "matched-frequency"), ("imagenet_v2/topimages", "top-images")],
)
def test_other_spellings_are_refused_with_the_right_name(spelling, right, tmp_path):
    with pytest.raises(ValueError, match=f"did you mean '{right}'"):
        ImageNetV2(config_name=spelling, cache_dir=str(tmp_path))


def test_unknown_config_lists_the_configs(tmp_path):
    with pytest.raises(ValueError, match="The configs are 'matched-frequency', 'threshold-0.7', 'top-images'"):
        get_variant("imagenet-a")


# --- building every config ---------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_every_config_builds_10000_correctly_labelled_rows(imagenetv2_datasets, config):
    ds = imagenetv2_datasets[config]
    assert ds.num_rows == 10_000
    rows = ds.select_columns(["label", "wnid", "candidate_id"]).to_dict()
    # labels: each image's label is the class_info.json index of its wnid
    assert all(WNID_OF_INDEX[label] == wnid for label, wnid in zip(rows["label"], rows["wnid"]))
    assert collections.Counter(rows["label"]) == {i: 10 for i in range(1000)}
    # the images are exactly the released revision's (candidate id, wnid) pairs
    assert set(zip(rows["candidate_id"], rows["wnid"])) == released_pairs(config)


def test_label_names_are_unique_and_in_the_standard_order(imagenetv2_datasets):
    names = imagenetv2_datasets["matched-frequency"].features["label"].names
    assert len(names) == 1000 and len({n.lower() for n in names}) == 1000
    assert names[0] == CLASS_INFO[0]["synset"][0] == "tench"
    assert names[134] == "crane (bird)" and CLASS_INFO[134]["wnid"] == "n02012849"
    assert names[517] == "crane (machine)" and CLASS_INFO[517]["wnid"] == "n03126707"
    plain = [i for i, c in enumerate(CLASS_INFO) if names[i] != c["synset"][0]]
    assert len(plain) == 5  # only the clashing lemmas are renamed


def test_images_are_the_archive_bytes(imagenetv2_datasets):
    """The image column holds each archive member's bytes unchanged (no re-encoding)."""
    ds = imagenetv2_datasets["threshold-0.7"].cast_column("image", datasets.Image(decode=False))
    archived = {e.name.split("/", 1)[1]: e.data for e in release_entries("threshold-0.7") if e.data is not None}
    for row in ds.select(range(0, 10_000, 97)):
        assert row["image"]["bytes"] == archived[f"{row['label']}/{row['candidate_id']}.jpeg"]
        assert row["image"]["path"] is None  # a relative path could name a local file, and datasets would keep that instead
    decoded = imagenetv2_datasets["threshold-0.7"][0]["image"]
    assert decoded.format == "JPEG" and decoded.size == (8, 8)


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_candidate_metadata_from_the_search_records(imagenetv2_datasets, config):
    records = search_records()
    ds = imagenetv2_datasets[config]
    rows = ds.select_columns(["candidate_id", "flickr_id", "url", "date_taken", "date_uploaded", "search_key", "width", "height"]).to_dict()
    with_record = [i for i, cid in enumerate(rows["candidate_id"]) if cid in records]
    assert sum(f is not None for f in rows["flickr_id"]) == len(with_record) > 0
    for i in with_record[:50]:
        r = records[rows["candidate_id"][i]]
        assert rows["flickr_id"][i] == r["id_search_engine"]
        assert rows["url"][i] == r["url"] and rows["search_key"][i] == r["search_key"]
        assert rows["date_taken"][i] == r["date_taken"] and rows["date_uploaded"][i] == r["date_upload_search_engine"]
        as_int = lambda v: None if v is None else int(v)  # noqa: E731  (some records hold strings or nulls)
        assert (rows["width"][i], rows["height"][i]) == (as_int(r["width"]), as_int(r["height"]))
    without = [i for i, cid in enumerate(rows["candidate_id"]) if cid not in records]
    assert all(rows["url"][i] is None and rows["width"][i] is None for i in without)


def test_search_result_files_in_data_dir_add_metadata(tmp_path):
    """Records from <data_dir>/search_results/*.json fill rows the packaged records lack."""
    records = search_records()
    missing = sorted(cid for cid, _ in released_pairs("top-images") if cid not in records)[:3]
    wnid = dict(released_pairs("top-images"))
    folder = tmp_path / "data"
    checksum = write_imagenetv2_archive(folder, "top-images")
    (folder / "search_results").mkdir()
    fake = [
        {"id_ours": cid, "id_search_engine": str(1000 + i), "url": f"https://example.org/{i}.jpg", "wnid": wnid[cid],
         "search_key": "key", "date_taken": "2012-08-01 10:00:00", "date_upload_search_engine": "2012-08-02 10:00:00",
         "width": 640, "height": 480}
        for i, cid in enumerate(missing)
    ]
    (folder / "search_results" / "2018-09-01_test.json").write_text(json.dumps(fake))
    ds = build(folder, tmp_path / "cache", "top-images", archive_checksum=checksum)
    by_id = {r["candidate_id"]: r for r in ds.select_columns(["candidate_id", "flickr_id", "width"]).to_list()}
    assert [by_id[cid]["flickr_id"] for cid in missing] == ["1000", "1001", "1002"]
    assert by_id[missing[0]]["width"] == 640


def test_download_from_the_pinned_url_through_the_download_manager(tmp_path, monkeypatch):
    """Without data_dir the archive and the search results are downloaded (here from a loopback
    server standing in for the Hub and GitHub) through the datasets download manager, and cached."""
    import functools
    import http.server
    import threading

    import imagenetv2.metadata as metadata
    import imagenetv2.variants as variants

    served = tmp_path / "served"
    checksum = write_imagenetv2_archive(served / "hub", "top-images", compression="gz")
    record = next(iter(search_records().values()))
    (served / "raw").mkdir()
    (served / "raw" / "sr.json").write_text(json.dumps([record]))
    (served / "tree.json").write_text(json.dumps({"tree": [{"path": "data/search_results/sr.json", "type": "blob"}]}))
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(f"{self.command} {self.path}")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        monkeypatch.setattr(variants, "HUB_URL", base + "/hub/{archive}")
        monkeypatch.setattr(metadata, "TREE_URL", base + "/tree.json")
        monkeypatch.setattr(metadata, "RAW_URL", base + "/raw/sr.json")
        variant = dataclasses.replace(get_variant("top-images"), archive=checksum)
        for cache in ("cache-a", "cache-a"):  # the second run reuses the cache
            builder = ImageNetV2(config_name="top-images", cache_dir=str(tmp_path / cache), variant=variant)
            builder.download_and_prepare()
        assert builder.as_dataset(split="test").num_rows == 10_000
    finally:
        server.shutdown()
    archive_gets = [r for r in requests if "GET /hub/" in r]
    assert len(archive_gets) == 1, requests


# --- sources: plain and gzip tars, extracted folders, spellings, junk -------------------------


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_plain_and_gzip_archives_give_the_same_rows(tmp_path, imagenetv2_datasets, imagenetv2_archive_dir, config):
    """Every config from the other compression than the session fixture's archive."""
    _, checksums = imagenetv2_archive_dir
    fixture_is_gzip = _is_gzip(imagenetv2_archive_dir[0] / checksums[config].name)
    other = write_imagenetv2_archive(tmp_path / "data", config, compression=None if fixture_is_gzip else "gz")
    assert _is_gzip(tmp_path / "data" / other.name) != fixture_is_gzip
    ds = build(tmp_path / "data", tmp_path / "cache", config, archive_checksum=other)
    columns = ["candidate_id", "label", "wnid"]
    assert ds.select_columns(columns).to_dict() == imagenetv2_datasets[config].select_columns(columns).to_dict()


def _is_gzip(path: Path) -> bool:
    return path.read_bytes()[:2] == b"\x1f\x8b"


def test_older_top_folder_spelling_and_os_junk(tmp_path, caplog):
    """Older copies spell the top folder differently; macOS leaves ._* and .DS_Store files."""
    entries = release_entries("top-images", top_folder="imagenetv2-topimages-format-val")
    entries += [
        Entry("imagenetv2-topimages-format-val/.DS_Store", b"junk"),
        Entry("imagenetv2-topimages-format-val/5/._" + entries[70].name.rsplit("/", 1)[1], b"\x00\x05\x16\x07"),
        Entry("__MACOSX/imagenetv2-topimages-format-val/._0", b"junk"),
    ]
    checksum = write_imagenetv2_archive(tmp_path / "data", "top-images", entries=entries)
    with caplog.at_level(logging.DEBUG, logger="imagenetv2.archive"):
        ds = build(tmp_path / "data", tmp_path / "cache", "top-images", archive_checksum=checksum)
    assert ds.num_rows == 10_000
    assert sum("skipping OS junk" in r.message for r in caplog.records) == 3


def test_extracted_top_folder(tmp_path, imagenetv2_archive_dir, monkeypatch):
    """data_dir may hold the extracted top folder instead of the archive (any spelling). Built
    from inside the top folder, where every class/file path names a real file, the rows still hold
    the bytes."""
    data_dir, _ = imagenetv2_archive_dir
    target = tmp_path / "data"
    with tarfile.open(data_dir / "imagenetv2-threshold0.7.tar.gz") as tar:
        tar.extractall(target, filter="data")
    (target / "imagenetv2-threshold0.7-format-val").rename(target / "imagenetv2-threshold-0.7-format-val")
    (target / "imagenetv2-threshold-0.7-format-val" / "3" / ".DS_Store").write_bytes(b"junk")
    monkeypatch.chdir(target / "imagenetv2-threshold-0.7-format-val")
    ds = build(target, tmp_path / "cache", "threshold-0.7")
    assert ds.num_rows == 10_000
    raw = ds.cast_column("image", datasets.Image(decode=False))[0]["image"]
    assert raw["bytes"][:2] == b"\xff\xd8" and raw["path"] is None
    assert set(zip(ds["candidate_id"], ds["wnid"])) == released_pairs("threshold-0.7")


def test_missing_source_names_the_archive_and_url(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"imagenetv2-matched-frequency\.tar\.gz .*huggingface\.co"):
        build(tmp_path / "empty", tmp_path / "cache")


# --- integrity -----------------------------------------------------------------------------------


def test_pinned_checksum_mismatch_names_file_and_both_hashes(tmp_path):
    checksum = write_imagenetv2_archive(tmp_path / "data", "matched-frequency")
    pinned = get_variant("matched-frequency").archive
    with pytest.raises(ChecksumError) as info:
        build(tmp_path / "data", tmp_path / "cache")
    message = str(info.value)
    assert "imagenetv2-matched-frequency.tar.gz" in message
    assert pinned.sha256 in message and checksum.sha256 in message
    assert_nothing_built(tmp_path / "cache")


def test_same_size_different_bytes_fails_after_the_stream_and_keeps_nothing(tmp_path):
    checksum = write_imagenetv2_archive(tmp_path / "data", "matched-frequency")
    wrong = FileChecksum(checksum.name, checksum.size, "0" * 64)
    with pytest.raises(ChecksumError, match=f"expected sha256 {'0' * 64}.*got sha256 {checksum.sha256}"):
        build(tmp_path / "data", tmp_path / "cache", archive_checksum=wrong)
    assert_nothing_built(tmp_path / "cache")


def test_no_checks_skips_the_checksum(tmp_path):
    write_imagenetv2_archive(tmp_path / "data", "matched-frequency", compression="gz")
    assert build(tmp_path / "data", tmp_path / "cache", verification_mode="no_checks").num_rows == 10_000


def test_the_2019_release_is_recognised_by_its_checksum(tmp_path):
    checksum = write_imagenetv2_archive(tmp_path / "data", "top-images")
    variant = get_variant("top-images")
    as_2019 = dataclasses.replace(variant, legacy_archive=FileChecksum(checksum.name, checksum.size, checksum.sha256))
    with pytest.raises(ChecksumError) as info:
        build(tmp_path / "data", tmp_path / "cache", "top-images", variant=as_2019)
    message = str(info.value)
    assert "2019 release" in message and "not candidate ids" in message and variant.url in message


def test_the_2019_layout_is_recognised_by_its_file_names(tmp_path):
    top = get_variant("matched-frequency").top_folder
    entries = [Entry(top, folder=True), Entry(f"{top}/0", folder=True)] + [
        Entry(f"{top}/0/{k}.jpeg", synthetic_jpeg(0, k)) for k in range(10)
    ]
    write_imagenetv2_archive(tmp_path / "data", "matched-frequency", entries=entries)
    with pytest.raises(LegacyReleaseError, match="2019 release.*not candidate ids"):
        build(tmp_path / "data", tmp_path / "cache", verification_mode="no_checks")
    assert_nothing_built(tmp_path / "cache")


@pytest.mark.parametrize("compression", [None, "gz"])
def test_truncated_archive(tmp_path, compression):
    checksum = write_imagenetv2_archive(tmp_path / "data", "matched-frequency", compression=compression)
    path = tmp_path / "data" / checksum.name
    path.write_bytes(path.read_bytes()[: checksum.size // 2])
    with pytest.raises(ArchiveError, match="truncated or corrupt"):
        build(tmp_path / "data", tmp_path / "cache", verification_mode="no_checks")
    assert_nothing_built(tmp_path / "cache")
    with pytest.raises(ChecksumError, match=f"got sha256 .* \\({checksum.size // 2} bytes\\)"):
        build(tmp_path / "data", tmp_path / "cache2", archive_checksum=checksum)


# --- layout and content errors ---------------------------------------------------------------------


def _modified(edit) -> list[Entry]:
    entries = release_entries("matched-frequency")
    edit(entries)
    return entries


def _image_index(entries, n=0):
    return [i for i, e in enumerate(entries) if e.data is not None][n]


TOP = get_variant("matched-frequency").top_folder
BAD_LAYOUTS = {
    "missing image": (lambda es: es.pop(_image_index(es, 123)), "1 of the 10000 images of revision imagenetv2-b-33 are missing"),
    "extra image": (lambda es: es.append(Entry(f"{TOP}/5/{'ab' * 20}.jpeg", synthetic_jpeg(5, 0))), "unexpected image 5/abab.*not in revision imagenetv2-b-33"),
    "wrong class folder": (
        lambda es: setattr(es[_image_index(es, 0)], "name", es[_image_index(es, 0)].name.replace(f"{TOP}/0/", f"{TOP}/1/")),
        "is in class folder 1, but revision imagenetv2-b-33 puts candidate .* in class 0",
    ),
    "non-integer class folder": (lambda es: es.append(Entry(f"{TOP}/tench", folder=True)), "class folder 'tench' is not an integer class index"),
    "zero-padded class folder": (
        lambda es: setattr(es[_image_index(es, 0)], "name", es[_image_index(es, 0)].name.replace(f"{TOP}/0/", f"{TOP}/000/")),
        "class folder '000'",
    ),
    "class index above 999": (lambda es: es.append(Entry(f"{TOP}/1000", folder=True)), "class folder '1000'"),
    "nested too deep": (lambda es: es.append(Entry(f"{TOP}/3/extra/x.jpeg", b"\xff\xd8\xff")), "unexpected path '3/extra/x.jpeg'"),
    "file at the top level": (lambda es: es.insert(1, Entry("README.txt", b"hi")), "at the top level"),
    "two top folders": (lambda es: es.append(Entry("other-folder/0", folder=True)), "more than one top folder"),
    "not a candidate id": (lambda es: es.append(Entry(f"{TOP}/0/photo.jpeg", synthetic_jpeg(0, 0))), "expected <candidate id>.jpeg"),
    "corrupt jpeg": (
        lambda es: setattr(es[_image_index(es, 42)], "data", b"this is not an image" * 10),
        r"4/[0-9a-f]{40}\.jpeg does not decode as an image",
    ),
    "truncated jpeg": (
        lambda es: setattr(es[_image_index(es, 7)], "data", es[_image_index(es, 7)].data[:300]),
        r"0/[0-9a-f]{40}\.jpeg does not decode as an image",
    ),
    "path traversal": (lambda es: es.append(Entry(f"{TOP}/../../evil.jpeg", b"x")), "points outside the archive"),
    "absolute path": (lambda es: es.append(Entry("/etc/evil.jpeg", b"x")), "absolute or non-POSIX path"),
    "symlink": (lambda es: es.append(Entry(f"{TOP}/0/{'cd' * 20}.jpeg", link_target="/etc/passwd")), "it is a link"),
    "hard link": (lambda es: es.append(Entry(f"{TOP}/0/{'ef' * 20}.jpeg", link_target=es[3].name, hard=True)), "it is a link"),
}


@pytest.mark.parametrize("case", BAD_LAYOUTS, ids=list(BAD_LAYOUTS))
def test_bad_archives_give_a_clear_error_and_leave_nothing(tmp_path, case):
    edit, pattern = BAD_LAYOUTS[case]
    checksum = write_imagenetv2_archive(tmp_path / "data", "matched-frequency", entries=_modified(edit), compression="gz")
    with pytest.raises(ArchiveError, match=pattern) as info:
        build(tmp_path / "data", tmp_path / "cache", archive_checksum=checksum)
    assert str(tmp_path / "data" / checksum.name) in str(info.value)  # the error names the file
    assert_nothing_built(tmp_path / "cache")


@pytest.mark.parametrize("case", ["corrupt jpeg", "truncated jpeg"])
def test_broken_images_are_caught_on_the_pinned_path_too(tmp_path, case):
    """With the release's own checksum the builder only checks JPEG markers: still an error."""
    edit, pattern = BAD_LAYOUTS[case]
    checksum = write_imagenetv2_archive(tmp_path / "data", "matched-frequency", entries=_modified(edit))
    variant = dataclasses.replace(get_variant("matched-frequency"), archive=checksum)
    with pytest.raises(ArchiveError, match=pattern):
        build(tmp_path / "data", tmp_path / "cache", variant=variant)


def test_symlinked_folder_in_extracted_tree_is_refused(tmp_path):
    top = tmp_path / "data" / get_variant("top-images").top_folder
    for i in range(1000):
        (top / str(i)).mkdir(parents=True)
    (top / "1000").symlink_to(top / "0")
    with pytest.raises(ArchiveError, match="it is a link"):
        build(tmp_path / "data", tmp_path / "cache", "top-images")

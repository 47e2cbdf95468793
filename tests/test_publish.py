"""The push's pieces without a server: folder checks (one test per refusal), the revision
record and card, the diff of ids, names, and token redaction."""

from __future__ import annotations

import collections
import json
import shutil

import datasets
import pytest
import yaml

from pipeline.core.export import ConfigExport, read_card, write_hub_folder
from pipeline.publish.changes import ReleaseRecord, card_with_release, diff_ids
from pipeline.publish.folder import FolderError, check_folder, read_revision_file_name
from pipeline.publish.hub import check_ref_name, check_repo_id, describe_failure, redact
from pipeline.publish.names import CHANGES_FILE, IMAGE_SHA256
from pipeline.publish.plan import next_auto_tag
from pipeline.toys.synthetic import tiny_jpeg

FEATURES = datasets.Features(
    {"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog"]), "candidate_id": datasets.Value("string")}
)


def toy_dataset(ids, features=FEATURES):
    rows = {
        "image": [{"bytes": tiny_jpeg(hash(i) % 10_000), "path": None} for i in ids],
        "label": [n % 2 for n in range(len(ids))],
        "candidate_id": list(ids),
    }
    if "candidate_id" not in features:
        del rows["candidate_id"]
    return datasets.Dataset.from_dict(rows, features=features)


@pytest.fixture
def folder(tmp_path):
    """Two configs with an Image, a ClassLabel and a candidate id, and a revision file for one."""
    exports = [
        ConfigExport("first", toy_dataset([f"a{i}" for i in range(12)]), default=True),
        ConfigExport("second", toy_dataset([f"b{i}" for i in range(8)])),
    ]
    revision = json.dumps({"output_filename": "toy-b-7.json", "seed": 1}).encode()
    return write_hub_folder(tmp_path / "toy", exports, "# Toy\n\nA toy set.", {"license": "mit", "row_id": "candidate_id"},
                            extra_files={"revisions/first.json": revision})  # fmt: skip


def rewrite_card(folder, edit):
    """Apply ``edit`` to the card's YAML (a dict) and write the card back."""
    text = (folder / "README.md").read_text()
    _, meta, body = text.split("---", 2)
    data = yaml.safe_load(meta)
    edit(data)
    (folder / "README.md").write_text("---\n" + yaml.safe_dump(data, sort_keys=False) + "---" + body)


def corrupt_pages(path):
    """Overwrite a Parquet file's data pages, keeping its footer (schema) readable."""
    data = bytearray(path.read_bytes())
    data[4 : len(data) // 2] = b"\xff" * (len(data) // 2 - 4)
    path.write_bytes(bytes(data))


def test_check_folder_summarises_a_good_folder(folder):
    checked = check_folder(folder)
    assert list(checked.configs) == ["first", "second"]
    first = checked.configs["first"]
    assert first.rows == {"test": 12} and first.id_key == "candidate_id"
    assert first.ids == collections.Counter(f"a{i}" for i in range(12))
    assert first.revision_file == "toy-b-7.json" and checked.configs["second"].revision_file is None
    assert first.features == FEATURES
    assert [f.path_in_repo for f in checked.files] == [
        "README.md", "data/first/test-00000-of-00001.parquet", "data/second/test-00000-of-00001.parquet", "revisions/first.json",
    ]  # fmt: skip


def test_check_folder_hashes_images_without_an_id_column(tmp_path):
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["x", "y"])})
    out = write_hub_folder(tmp_path / "noid", [ConfigExport("c", toy_dataset(["p", "q", "q"], features), default=True)], "# N", {})
    summary = check_folder(out).configs["c"]
    assert summary.id_key == IMAGE_SHA256
    assert sorted(summary.ids.values()) == [1, 2]  # two identical images counted twice


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: shutil.rmtree(f), "is not a folder"),
        (lambda f: (f / "README.md").unlink(), "has no README.md"),
        (lambda f: (f / "README.md").write_text("---\nlicense: [unclosed\n---\n# x\n"), "invalid YAML"),
        (lambda f: rewrite_card(f, lambda d: d.pop("configs")), "declares no `configs:`"),
        (lambda f: rewrite_card(f, lambda d: d.pop("dataset_info")), "has no `dataset_info:`"),
        (lambda f: shutil.rmtree(f / "data" / "second"), "config 'second' has no data: no file in the folder matches 'data/second/test-*'"),
        (lambda f: rewrite_card(f, lambda d: d["dataset_info"].pop(1)), "config 'second' has no entry in the card's dataset_info"),
        (lambda f: rewrite_card(f, lambda d: d["dataset_info"][0]["splits"][0].update(num_examples=13)),
         "config 'first' has rows {'test': 12} but the card's dataset_info says {'test': 13}"),
        (lambda f: rewrite_card(f, lambda d: d["dataset_info"][1]["features"][1]["dtype"]["class_label"]["names"].update({"1": "wolf"})),
         "data/second/test-00000-of-00001.parquet (config 'second') has features that differ from the card's dataset_info: column 'label'"),
        (lambda f: rewrite_card(f, lambda d: d["dataset_info"][0]["features"].pop(2)),
         "column 'candidate_id' not in the card"),
        (lambda f: (f / "data" / "first" / "test-00000-of-00001.parquet").write_bytes(b"not parquet"),
         "data/first/test-00000-of-00001.parquet (config 'first') is not a readable Parquet file"),
        (lambda f: corrupt_pages(f / "data" / "first" / "test-00000-of-00001.parquet"),
         "config 'first' does not load with datasets.load_dataset"),
        (lambda f: (f / "data" / "link.parquet").symlink_to(f / "data" / "first" / "test-00000-of-00001.parquet"),
         "data/link.parquet is a symbolic link"),
        (lambda f: (f / "revisions" / "first.json").write_text("{oops"), "revisions/first.json is not valid JSON"),
    ],
    ids=["no-folder", "no-card", "bad-yaml", "no-configs", "no-dataset-info", "config-without-data", "config-without-info",
         "row-count", "class-names", "extra-column", "unreadable-data", "corrupt-pages", "symlink", "bad-revision-file"],
)  # fmt: skip
def test_check_folder_refuses_and_says_what_is_wrong(folder, damage, message):
    damage(folder)
    with pytest.raises(FolderError) as info:
        check_folder(folder)
    assert message in str(info.value)


def test_refusal_lists_every_problem_and_the_fix(folder):
    rewrite_card(folder, lambda d: [d["dataset_info"][i]["splits"][0].update(num_examples=1) for i in (0, 1)])
    with pytest.raises(FolderError) as info:
        check_folder(folder)
    text = str(info.value)
    assert "config 'first' has rows" in text and "config 'second' has rows" in text
    assert "Rebuild the folder" in text


def test_check_folder_does_not_touch_the_folder(folder):
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    check_folder(folder)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before


def test_revision_file_name_falls_back_to_name_then_file_name(tmp_path):
    (tmp_path / "revisions").mkdir()
    (tmp_path / "revisions" / "a.json").write_text(json.dumps({"name": "rebuild-3"}))
    (tmp_path / "revisions" / "b.json").write_text(json.dumps({"seed": 4}))
    assert read_revision_file_name(tmp_path, "a") == "rebuild-3"
    assert read_revision_file_name(tmp_path, "b") == "b.json"
    assert read_revision_file_name(tmp_path, "c") is None


def test_diff_ids_counts_added_and_removed(folder):
    new = check_folder(folder).configs["first"]
    old = collections.Counter([f"a{i}" for i in range(3, 12)] + ["gone1", "gone2"])
    change = diff_ids("first", new, "candidate_id", old, first=False)
    assert (change.status, change.added, change.removed) == ("changed", ["a0", "a1", "a2"], ["gone1", "gone2"])
    assert (change.images_added, change.images_removed, change.rows) == (3, 2, 12)
    assert diff_ids("first", new, "candidate_id", new.ids, first=False).status == "unchanged"
    assert diff_ids("first", new, None, None, first=False).status == "new"
    assert diff_ids("first", new, IMAGE_SHA256, old, first=False).status == "unknown"  # not comparable
    first = diff_ids("first", new, None, None, first=True)
    assert (first.status, first.images_added) == ("first", None)
    gone = diff_ids("old", None, "candidate_id", old, first=False)
    assert (gone.status, gone.images_removed) == ("removed", 11)


def test_card_records_the_revision_and_replaces_an_old_record(folder):
    checked = check_folder(folder)
    changes = {
        "first": diff_ids("first", checked.configs["first"], "candidate_id", collections.Counter(["a0", "zz"] + [f"a{i}" for i in range(1, 11)]), first=False),
        "second": diff_ids("second", checked.configs["second"], "candidate_id", checked.configs["second"].ids, first=False),
    }  # fmt: skip
    record = ReleaseRecord("v2", "v1", changes)
    text = card_with_release(checked.card_text, record, "org/toy")
    again = card_with_release(text, ReleaseRecord("v3", "v2", changes), "org/toy")
    for card_text, name, previous in ((text, "v2", "v1"), (again, "v3", "v2")):
        card = yaml.safe_load(card_text.split("---")[1])
        assert card["revision"]["name"] == name and card["revision"]["previous"] == previous
        assert card["revision"]["configs"]["first"] == {
            "revision_file": "toy-b-7.json", "rows": 12, "compared_by": "candidate_id", "images_added": 1, "images_removed": 1,
        }  # fmt: skip
        assert card["revision"]["configs"]["second"]["images_added"] == 0
        assert card["license"] == "mit" and [c["config_name"] for c in card["configs"]] == ["first", "second"]
    assert again.count("## Revision") == 1 and "## Revision `v3`" in again and "A toy set." in again
    assert "| first | toy-b-7.json | 12 | 1 | 1 |" in again
    assert 'load_dataset("org/toy", "first", revision="v3")' in again
    payload = json.loads(record.changes_json())
    assert payload["configs"]["first"]["added"] == ["a11"] and payload["configs"]["first"]["removed"] == ["zz"]
    assert CHANGES_FILE == "revisions/changes.json"
    # the card with its record still reads as a dataset card
    path = folder.parent / "carded"
    path.mkdir()
    (path / "README.md").write_text(text)
    assert read_card(path).data["revision"]["name"] == "v2"


def test_names_are_checked():
    assert next_auto_tag([]) == "v1" and next_auto_tag(["v9", "v10", "x"]) == "v11"
    for bad in ("org", "org/na me", "a/b/c", "/x", "org/..", ""):
        with pytest.raises(ValueError, match="ORG/NAME"):
            check_repo_id(bad)
    for bad in ("refs/heads/x", "a..b", "with space", "end/", "-x", ""):
        with pytest.raises(ValueError, match="not allowed"):
            check_ref_name(bad, "tag")
    assert check_ref_name("release/2024-05", "branch") == "release/2024-05"


def test_messages_never_show_a_token():
    token = "hf_SECRETsecretSECRET1234"
    assert token not in redact(f"Authorization: Bearer {token}", token)
    assert "sk-custom-token" not in redact("token sk-custom-token leaked", "sk-custom-token")

    class Response:
        status_code = 401
        headers = {"X-Error-Message": f"bad token {token}"}

    class Rejected(Exception):
        response = Response()

    message = describe_failure(Rejected(f"401 for {token}"), "committing", token=token)
    assert token not in message and "rejected the token" in message and "HF_TOKEN" in message


@pytest.mark.parametrize("name", ["pipeline.publish.folder", "pipeline.publish.plan", "pipeline.publish.hub", "pipeline.publish.metric_space"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

"""Issue 11, sample: outputs checked first and written as one unit; bad settings and review files name themselves."""

import json
import os

import pyarrow.parquet as pq
import pytest
from helpers_rebuild import A, cid, pool_with, val

from pipeline.__main__ import main
from pipeline.core.ownership import OutputError
from pipeline.rebuild.pool import POOL_FILES, SELECTION_FREQUENCIES
from pipeline.rebuild.revision import SamplingConfig
from pipeline.rebuild.sample import sample_stage
from pipeline.rebuild.tables import write_table

CONFIG = SamplingConfig(rule="top-images", seed=0, per_class=2, wnids=(A,))


@pytest.fixture
def pool(tmp_path):
    """Six candidates of class A with ten annotations each, on disk as a pool folder."""
    memory, sf = pool_with([(cid(i), A, 10, 4 + i) for i in range(6)], [(val(1), A, 10, 9)])
    folder = tmp_path / "pool"
    write_table(memory.candidates, folder / POOL_FILES["candidates"])
    write_table(memory.originals, folder / POOL_FILES["originals"])
    write_table(sf, folder / SELECTION_FREQUENCIES)
    return folder


def outputs(path):
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(f"{path.stem}*")) if p.is_file()}


def decisions(path):
    return {r["candidate_id"]: r for r in pq.read_table(path.with_name(f"{path.stem}.decisions.parquet")).to_pylist()}


def cli(pool, output, *more):
    return main(["sample", str(pool), "--output", str(output), "--rule", "top-images", "--seed", "0", "--per-class", "2", "--classes", A, *more])


# --- outputs are one unit ----------------------------------------------------------------------


def test_output_naming_a_folder_is_refused_before_any_work(pool, tmp_path):
    (tmp_path / "r.json").mkdir()
    with pytest.raises(OutputError, match="r.json: it is a folder"):
        sample_stage(pool, tmp_path / "r.json", CONFIG)
    assert not (tmp_path / "r.report.json").exists() and not (tmp_path / "r.decisions.parquet").exists()


def test_read_only_revision_keeps_the_previous_run_whole(pool, tmp_path):
    revision = tmp_path / "r.json"
    sample_stage(pool, revision, CONFIG)
    before = outputs(revision)
    revision.chmod(0o444)
    with pytest.raises(OutputError, match="r.json: it is read-only"):
        sample_stage(pool, revision, SamplingConfig(rule="top-images", seed=7, per_class=3, wnids=(A,)))
    assert outputs(revision) == before


def test_failed_rename_of_the_revision_puts_the_old_report_and_decisions_back(pool, tmp_path, monkeypatch):
    revision = tmp_path / "r.json"
    sample_stage(pool, revision, CONFIG)
    before = outputs(revision)
    real_replace = os.replace

    def failing(src, dst):
        if os.fspath(dst) == os.fspath(revision) and ".tmp-" in os.fspath(src):
            raise PermissionError(13, "Permission denied", os.fspath(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(PermissionError):
        sample_stage(pool, revision, SamplingConfig(rule="top-images", seed=7, per_class=3, wnids=(A,)))
    monkeypatch.undo()
    assert outputs(revision) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".r.")] == []  # no temporaries left


def test_users_file_where_the_report_goes_is_refused_and_nothing_is_written(pool, tmp_path):
    (tmp_path / "r.report.json").write_text("my report")
    with pytest.raises(OutputError, match="refusing to replace .*r.report.json"):
        sample_stage(pool, tmp_path / "r.json", CONFIG)
    assert (tmp_path / "r.report.json").read_text() == "my report"
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.decisions.parquet").exists()


def test_output_that_is_the_previous_revision_is_refused(pool, tmp_path):
    first = tmp_path / "r-0.json"
    sample_stage(pool, first, CONFIG)
    before = outputs(first)
    with pytest.raises(OutputError, match="it is, contains or lies inside the input"):
        sample_stage(pool, first, CONFIG, starting_from=first)
    assert outputs(first) == before


def test_rerun_replaces_its_own_three_files(pool, tmp_path):
    revision = tmp_path / "r.json"
    sample_stage(pool, revision, CONFIG)
    sample_stage(pool, revision, SamplingConfig(rule="top-images", seed=1, per_class=3, wnids=(A,)))
    assert len(json.loads(revision.read_text())["image_filenames"]) == 3
    assert json.loads((tmp_path / "r.report.json").read_text())["images"] == 3
    assert sum(r["decision"] == "selected" for r in decisions(revision).values()) == 3


# --- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (["--min-annotations", "-5"], "--min-annotations: min_num_annotations must be a whole number >= 0 (a count), got -5"),
        (["--min-annotations-val", "-1"], "--min-annotations-val: min_num_annotations_val must be a whole number >= 0"),
        (["--min-val-images-per-class", "-2"], "--min-val-images-per-class: min_num_val_images_per_wnid must be a whole number >= 0"),
        (["--threshold", "1.5"], "--threshold: threshold selection_frequency_threshold = 1.5 is not a selection frequency in [0, 1]"),
        (["--threshold", "-0.1"], "is not a selection frequency in [0, 1]"),
        (["--wnid-threshold", f"{A}=7"], f"threshold {A} = 7.0 is not a selection frequency in [0, 1]"),
        (["--histogram-bins", "0.2,0.4,1.6"], "--histogram-bins: histogram_bins [0.2, 0.4, 1.6] must be increasing selection frequencies in [0, 1]"),
        (["--histogram-bins", "0.6,0.2"], "must be increasing"),
        (["--review-targets", "l2=-1,fc7=1,dssim=0.2"], "--review-targets: near_duplicate_review_targets l2 = -1.0 must be a finite distance >= 0"),
    ],
)
def test_negative_counts_and_out_of_range_thresholds_are_refused(pool, tmp_path, capsys, options, message):
    assert cli(pool, tmp_path / "r.json", *options) == 1
    assert message in capsys.readouterr().err
    assert list(tmp_path.glob("r*")) == []


# --- the original pipeline's review files ------------------------------------------------------


def test_blacklist_as_the_original_json_object_keeps_its_reasons(pool, tmp_path, capsys):
    blacklist = tmp_path / "blacklist.json"
    blacklist.write_text(json.dumps({cid(5): "cartoon", cid(4): "blurry"}))
    assert cli(pool, tmp_path / "r.json", "--blacklist", str(blacklist)) == 0
    rows = decisions(tmp_path / "r.json")
    assert (rows[cid(5)]["decision"], rows[cid(5)]["blacklist_reason"]) == ("blacklisted", "cartoon")
    assert (rows[cid(4)]["decision"], rows[cid(4)]["blacklist_reason"]) == ("blacklisted", "blurry")
    assert rows[cid(3)]["decision"] == "selected" and rows[cid(3)]["blacklist_reason"] is None
    assert json.loads((tmp_path / "r.report.json").read_text())["exclusions"]["blacklisted"] == 2


def test_blacklist_as_a_list_has_no_reasons(pool, tmp_path):
    blacklist = tmp_path / "blacklist.json"
    blacklist.write_text(json.dumps([cid(5)]))
    sample_stage(pool, tmp_path / "r.json", CONFIG, blacklist=blacklist)
    row = decisions(tmp_path / "r.json")[cid(5)]
    assert (row["decision"], row["blacklist_reason"]) == ("blacklisted", None)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("blacklist.json", b'{"' + cid(5).encode() + b'": "cartoon",}', "blacklist.json: not valid JSON (Expecting property name enclosed in double quotes at line 1 column 56)"),
        ("blacklist.json", b'{"' + cid(5).encode() + b'": 3}', f"blacklist.json key '{cid(5)}': the reason is 3"),
        ("blacklist.json", b"42", "blacklist.json: expected a JSON object {candidate_id: reason} or a list of candidate ids, got int"),
        ("blacklist.txt", cid(5).encode() + b"\n# r\xe9vis\xe9\n", "blacklist.txt line 2: not UTF-8 text (byte 0xe9"),
    ],
)
def test_bad_blacklist_files_are_named(pool, tmp_path, capsys, name, content, message):
    (tmp_path / name).write_bytes(content)
    assert cli(pool, tmp_path / "r.json", "--blacklist", str(tmp_path / name)) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_near_duplicates_of_imagenet_test_images_are_accepted(pool, tmp_path):
    near = tmp_path / "near_duplicates.json"
    near.write_text(json.dumps({cid(5): ["ILSVRC2012_test_00011250.JPEG"], cid(4): [cid(3)]}))
    sample_stage(pool, tmp_path / "r.json", CONFIG, near_duplicates=near)
    rows = decisions(tmp_path / "r.json")
    assert rows[cid(5)]["decision"] == "near_duplicate"  # a duplicate of an ImageNet image is always excluded
    assert {rows[cid(4)]["decision"], rows[cid(3)]["decision"]} == {"near_duplicate", "selected"}  # one of the pair is kept


def test_invalid_json_in_near_duplicates_names_the_file(pool, tmp_path, capsys):
    (tmp_path / "near_duplicates.json").write_text("{oops")
    assert cli(pool, tmp_path / "r.json", "--near-duplicates", str(tmp_path / "near_duplicates.json")) == 1
    assert "near_duplicates.json: not valid JSON" in capsys.readouterr().err


def test_a_file_another_command_wrote_beside_it_is_not_replaced(pool, tmp_path):
    from pipeline.core.ownership import write_owned_text

    write_owned_text(tmp_path / "sf.json", "{}\n", "selection-frequency")  # the report beside sf.parquet
    before = (tmp_path / "sf.json").read_bytes()
    with pytest.raises(OutputError, match="sf.json: selection-frequency wrote it, not sample"):
        sample_stage(pool, tmp_path / "sf.json", CONFIG)
    assert (tmp_path / "sf.json").read_bytes() == before and not (tmp_path / "sf.report.json").exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664)])
def test_the_three_files_respect_the_umask(pool, tmp_path, umask, mode):
    import stat

    old = os.umask(umask)
    try:
        sample_stage(pool, tmp_path / "r.json", CONFIG)
    finally:
        os.umask(old)
    for name in ("r.json", "r.report.json", "r.decisions.parquet"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name

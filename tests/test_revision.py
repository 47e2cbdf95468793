"""Revision files: the released ones load, ours have the same keys, and a revision regenerates bit for bit."""

import json
from collections import Counter
from importlib import resources

import numpy as np
import pyarrow as pa
import pytest
from helpers_rebuild import A, B, cid, pool_with, val

from pipeline.__main__ import main
from pipeline.rebuild.near_duplicate_rules import RELEASED_REVIEW_TARGETS, resolve_near_duplicates, review_finished
from pipeline.rebuild.revision import KEY_ORDER, RELEASED, SamplingConfig, load_revision, revision_from_json, sampling_config
from pipeline.rebuild.sample import sample_revision
from pipeline.toys.synthetic_pool import PoolShape, make_synthetic_pool
from pipeline.rebuild.tables import write_table


def released_json(name):
    return json.loads(resources.files("imagenetv2").joinpath(f"data/{name}.json").read_text("utf-8"))


@pytest.mark.parametrize("rule, name", sorted(RELEASED.items()))
def test_released_revisions_load(rule, name):
    revision = load_revision(name)
    assert revision.config.rule == rule
    assert len(revision.image_filenames) == 10_000
    per_class = Counter(w for _, w in revision.image_filenames)
    assert len(per_class) == 1000 and set(per_class.values()) == {10}
    assert revision.is_valid and revision.config.per_class == 10
    # written back, a released revision is the released file: same keys, same order, same values
    data = released_json(name)
    assert revision.to_json() == data
    assert list(revision.to_json()) == list(data)


def test_released_configs_are_the_published_ones():
    b, a, c = (load_revision(n).config for n in ("imagenetv2-b-33", "imagenetv2-a-44", "imagenetv2-c-12"))
    assert (b.seed, a.seed, c.seed) == (274721306, 600717499, 940573347)  # NOTES.md
    assert b.histogram_bins == (0.2, 0.4, 0.6, 0.8) and b.allow_upward_sampling and b.min_num_val_images_per_wnid == 20
    assert a.wnid_thresholds == {"n03014705": 0.6, "n02090379": 0.6, "n03804744": 0.5}
    assert c.min_num_annotations == 10 and c.near_duplicate_review_targets == RELEASED_REVIEW_TARGETS


@pytest.mark.parametrize("rule", ["matched-frequency", "threshold-0.7", "top-images"])
def test_our_revisions_have_the_released_keys(rule):
    function = SamplingConfig(rule=rule, seed=0).sampling_function
    released = released_json(RELEASED[rule])
    pool, sf = pool_with([(cid(i), A, 10, 9) for i in range(30)], [(val(i), A, 10, 8) for i in range(20)])
    out = sample_revision(pool, sf, SamplingConfig(rule=rule, seed=0, per_class=3, wnids=(A,)), output_filename="x.json", previous=None)
    ours = out.revision.to_json()
    # the released keys, minus starting_from (not chained here), plus wnids (a class subset)
    assert set(ours) == (set(released) - {"starting_from"}) | {"wnids"}
    assert [k for k in ours if k in released] == [k for k in released if k in ours]
    assert list(ours) == [k for k in KEY_ORDER[function] if k in ours]
    assert revision_from_json(json.loads(out.revision.dumps())) == out.revision


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sampling_function": "sample_val_dummy"}, "not one of"),
        ({"target_size": 10_001}, "not a multiple"),
        ({"image_filenames": [["a" * 40, "n99999999"]]}, "not one of the revision's classes"),
        ({"image_filenames": [["a" * 40, "n01440764"], ["a" * 40, "n01440764"]]}, "listed twice"),
    ],
)
def test_bad_revision_files_are_refused(change, message):
    data = released_json("imagenetv2-c-12") | change
    with pytest.raises(ValueError, match=message):
        revision_from_json(data, "bad.json")
    missing = {k: v for k, v in released_json("imagenetv2-c-12").items() if k != "seed"}
    with pytest.raises(ValueError, match="missing key"):
        sampling_config(missing)


def test_config_validation_names_the_problem():
    with pytest.raises(ValueError, match="unknown sampling rule 'matched'"):
        SamplingConfig(rule="matched", seed=0)
    with pytest.raises(ValueError, match="unknown wnid"):
        SamplingConfig(rule="threshold-0.7", seed=0, wnid_thresholds={"n0000": 0.5})
    with pytest.raises(ValueError, match="not a selection frequency"):
        SamplingConfig(rule="threshold-0.7", seed=0, selection_frequency_threshold=1.5)


# --- near-duplicates --------------------------------------------------------------------------


def test_component_touching_an_original_removes_all_its_candidates():
    ids = [cid(i) for i in range(4)]
    pairs = pa.table({"image_id": [ids[0], ids[1]], "duplicate_id": [ids[1], "n01440764_10026.JPEG"]})
    flags = resolve_near_duplicates(ids, [A] * 4, np.full(4, 0.9), np.full(4, 10), np.zeros(4, bool), pairs)
    assert flags.tolist() == [True, True, False, False]


def test_component_of_candidates_keeps_one():
    # one component {0, 1, 2} in class A: the highest selection frequency is kept
    ids = [cid(i) for i in range(4)]
    pairs = pa.table({"image_id": [ids[0], ids[1]], "duplicate_id": [ids[1], ids[2]]})
    flags = resolve_near_duplicates(ids, [A] * 4, np.array([0.8, 0.95, 0.9, 0.1]), np.full(4, 10), np.zeros(4, bool), pairs)
    assert flags.tolist() == [True, False, True, False]
    # a blacklisted candidate scores 0, so another one is kept
    flags = resolve_near_duplicates(ids, [A] * 4, np.array([0.8, 0.95, 0.9, 0.1]), np.full(4, 10), np.array([False, True, False, False]), pairs)
    assert flags.tolist() == [True, True, False, False]
    # an override decides
    flags = resolve_near_duplicates(ids, [A] * 4, np.array([0.8, 0.95, 0.9, 0.1]), np.full(4, 10), np.zeros(4, bool), pairs, overrides=[ids[0]])
    assert flags.tolist() == [False, True, True, False]


def test_component_across_classes_keeps_the_class_with_fewest_good_candidates():
    # {0 (A, 0.9), 1 (B, 0.8)}; A has 3 good candidates (>= 0.7), B only this one: keep B's
    ids = [cid(i) for i in range(5)]
    wnids = [A, B, A, A, B]
    sf = np.array([0.9, 0.8, 0.9, 0.9, 0.2])
    pairs = pa.table({"image_id": [ids[0]], "duplicate_id": [ids[1]]})
    flags = resolve_near_duplicates(ids, wnids, sf, np.full(5, 10), np.zeros(5, bool), pairs)
    assert flags.tolist() == [True, False, False, False, False]


def test_same_search_engine_photo_links_candidates():
    ids = [cid(i) for i in range(3)]
    flags = resolve_near_duplicates(ids, [A] * 3, np.array([0.5, 0.9, 0.7]), np.full(3, 10), np.zeros(3, bool), None,
                                    search_engine_ids=["123", "123", None])
    assert flags.tolist() == [True, False, False]


def test_near_duplicate_input_errors_name_the_row():
    ids = [cid(0)]
    with pytest.raises(ValueError, match="row 1: duplicate_id 'holiday.jpg' is neither"):
        resolve_near_duplicates(ids, [A], np.ones(1), np.ones(1), np.zeros(1, bool), pa.table({"image_id": ids, "duplicate_id": ["holiday.jpg"]}))
    with pytest.raises(ValueError, match="row 1: image_id"):
        resolve_near_duplicates(ids, [A], np.ones(1), np.ones(1), np.zeros(1, bool), pa.table({"image_id": [cid(5)], "duplicate_id": ids}))


def test_review_is_finished_only_beyond_every_target():
    review = pa.table({"candidate_id": [cid(0), cid(1)], "l2": [2e8, 2e8], "fc7": [2e4, 13200.0], "dssim": [0.3, 0.3]})
    # cid(1): fc7 reviewed up to exactly the target, which is not beyond it; cid(2): no review at all
    assert review_finished([cid(0), cid(1), cid(2)], review, RELEASED_REVIEW_TARGETS).tolist() == [True, False, False]
    assert review_finished([cid(0)], None, RELEASED_REVIEW_TARGETS) is None


# --- regeneration through the command line ----------------------------------------------------


@pytest.fixture
def small_pool_folder(tmp_path):
    """A synthetic pool (5 classes) written as a pool folder with its selection frequencies."""
    from pipeline.rebuild.ingest import POOL_FILES
    from pipeline.rebuild.selection_frequency import selection_frequency_stage

    shape = PoolShape(n_classes=5, candidates_per_class=30, originals_per_class=25, positive_controls=25, negative_controls=2,
                      grid=30, annotators=12, workers=40, spammer_fraction=0.0, rejected_fraction=0.0)
    synthetic = make_synthetic_pool(3, shape)
    folder = tmp_path / "pool"
    write_table(synthetic.candidates_table(), folder / POOL_FILES["candidates"])
    write_table(synthetic.originals_table(), folder / POOL_FILES["originals"])
    write_table(synthetic.annotations(), folder / POOL_FILES["annotations"])
    from pipeline.rebuild.tables import from_rows

    write_table(from_rows([], "images"), folder / POOL_FILES["images"])
    selection_frequency_stage(folder)
    return folder, synthetic


@pytest.mark.parametrize("rule", ["matched-frequency", "threshold-0.7", "top-images"])
def test_regenerate_a_revision_bit_for_bit(small_pool_folder, tmp_path, rule, capsys):
    folder, synthetic = small_pool_folder
    classes = ",".join(synthetic.wnids)
    first = tmp_path / "a" / "rev.json"
    assert main(["sample", str(folder), "--rule", rule, "--seed", "7", "--per-class", "4", "--classes", classes, "--output", str(first)]) == 0
    # chain once, so that regeneration needs the previous revision too
    blacklist = tmp_path / "blacklist.json"
    blacklist.write_text(json.dumps(sorted(c for c, _ in load_revision(first).image_filenames)[:3]))
    second = tmp_path / "a" / "rev-1.json"
    assert main(["sample", str(folder), "--rule", rule, "--seed", "8", "--per-class", "4", "--classes", classes,
                 "--blacklist", str(blacklist), "--starting-from", str(first), "--output", str(second)]) == 0
    again = tmp_path / "b" / "rev-1.json"
    assert main(["sample", str(folder), "--config-from", str(second), "--blacklist", str(blacklist), "--starting-from", str(first), "--output", str(again)]) == 0
    assert again.read_bytes() == second.read_bytes()
    assert (tmp_path / "b" / "rev-1.decisions.parquet").read_bytes() == (tmp_path / "a" / "rev-1.decisions.parquet").read_bytes()
    report = json.loads((tmp_path / "a" / "rev-1.report.json").read_text())
    assert report["inputs"]["starting_from"]["file"] == "rev.json" and report["carried_over"] == 17 and report["replaced_from_previous"] == 3
    # without the previous revision, regeneration is refused with the reason
    capsys.readouterr()
    assert main(["sample", str(folder), "--config-from", str(second), "--output", str(tmp_path / "c" / "rev-1.json")]) == 1
    assert "pass that revision with --starting-from" in capsys.readouterr().err


def test_sample_command_errors_and_invalid_exit_status(small_pool_folder, tmp_path, capsys):
    folder, synthetic = small_pool_folder
    assert main(["sample", str(folder), "--output", str(tmp_path / "x.json")]) == 1
    assert "give --rule and --seed" in capsys.readouterr().err
    # all 1000 classes but a pool of 5: written, marked invalid, exit status 3
    assert main(["sample", str(folder), "--rule", "top-images", "--seed", "1", "--output", str(tmp_path / "x.json")]) == 3
    assert json.loads((tmp_path / "x.json").read_text())["is_valid"] is False
    report = json.loads((tmp_path / "x.report.json").read_text())
    assert len(report["short_classes"]) == 995 and report["images"] == 50

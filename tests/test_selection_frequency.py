"""Selection frequencies: counted statuses, controls, the worker filter, and an independent check."""

import json

import numpy as np
import pytest
from helpers_rebuild import A, B, cid, val

from pipeline.__main__ import main
from pipeline.rebuild.ingest import POOL_FILES
from pipeline.rebuild.selection_frequency import compute_selection_frequencies, worker_control_accuracy
from pipeline.toys.synthetic_pool import PoolShape, make_synthetic_pool
from pipeline.rebuild.tables import from_rows, read_table, write_table


def annotation(assignment, worker, status, image, wnid, selected):
    return {"assignment_id": assignment, "hit_id": "H", "worker_id": worker, "status": status, "image_id": image, "wnid": wnid, "selected": selected}


ORIGINALS = from_rows([{"image_id": val(1), "wnid": A}, {"image_id": val(2), "wnid": B}], "originals")
# W1, W2 honest; W3 gets both controls wrong. val(1) is a positive control for A, val(2) a negative one.
ROWS = [
    annotation("a1", "W1", "Approved", cid(0), A, True),
    annotation("a1", "W1", "Approved", val(1), A, True),
    annotation("a1", "W1", "Approved", val(2), A, False),
    annotation("a2", "W2", "Submitted", cid(0), A, False),
    annotation("a2", "W2", "Submitted", val(1), A, True),
    annotation("a2", "W2", "Submitted", val(2), A, False),
    annotation("a3", "W3", "Approved", cid(0), A, True),
    annotation("a3", "W3", "Approved", val(1), A, False),
    annotation("a3", "W3", "Approved", val(2), A, True),
    annotation("a4", "W1", "Rejected", cid(0), A, True),
    annotation("a5", "W2", "Approved", cid(1), B, True),
]


def as_dict(table):
    return {(r["image_id"], r["wnid"]): (r["num_shown"], r["num_selected"], r["is_original"]) for r in table.to_pylist()}


def test_counts_by_hand():
    table, report = compute_selection_frequencies(from_rows(ROWS, "annotations"), ORIGINALS)
    # cid(0) for A: a1 yes, a2 no, a3 yes (a4 rejected): 2 of 3
    assert as_dict(table) == {
        (cid(0), A): (3, 2, False),
        (cid(1), B): (1, 1, False),
        (val(1), A): (3, 2, True),
        (val(2), A): (3, 1, True),
    }
    assert table.column("image_id").to_pylist() == sorted(table.column("image_id").to_pylist())
    assert report["annotation_rows"] == {"total": 11, "counted": 10, "rejected": 1, "dropped_workers": 0}
    assert report["mean_selection_frequency"]["originals_own_class"] == pytest.approx(2 / 3)  # only val(1) is of class A


def test_worker_control_accuracy_and_filter():
    accuracy = {r["worker_id"]: (r["controls"], r["correct"]) for r in worker_control_accuracy(from_rows(ROWS, "annotations"), ORIGINALS).to_pylist()}
    assert accuracy == {"W1": (2, 2), "W2": (2, 2), "W3": (2, 0)}
    table, report = compute_selection_frequencies(from_rows(ROWS, "annotations"), ORIGINALS, min_control_accuracy=0.5)
    assert as_dict(table)[(cid(0), A)] == (2, 1, False)  # W3's yes is gone
    assert [w["worker_id"] for w in report["worker_filter"]["dropped"]] == ["W3"]
    assert report["annotation_rows"]["dropped_workers"] == 3
    with pytest.raises(ValueError, match="min_control_accuracy must be in \\[0, 1\\]"):
        compute_selection_frequencies(from_rows(ROWS, "annotations"), ORIGINALS, min_control_accuracy=70)


def test_against_an_independent_pandas_groupby():
    shape = PoolShape(n_classes=20, candidates_per_class=30, originals_per_class=5, positive_controls=3, negative_controls=2,
                      grid=12, annotators=7, workers=50, spammer_fraction=0.1, rejected_fraction=0.1)
    pool = make_synthetic_pool(5, shape)
    annotations = pool.annotations()
    table, _ = compute_selection_frequencies(annotations, pool.originals_table())
    frame = annotations.to_pandas()
    frame = frame[frame["status"].isin(["Submitted", "Approved"])]
    expected = frame.groupby(["image_id", "wnid"])["selected"].agg(["count", "sum"]).reset_index()
    ours = table.to_pandas()
    merged = ours.merge(expected, on=["image_id", "wnid"], how="outer", indicator=True)
    assert (merged["_merge"] == "both").all()
    assert (merged["num_shown"] == merged["count"]).all() and (merged["num_selected"] == merged["sum"]).all()
    np.testing.assert_allclose(merged["selection_frequency"], merged["sum"] / merged["count"])
    assert set(ours.loc[ours["is_original"], "image_id"]) <= set(pool.original_ids)


def test_spammers_are_the_workers_the_filter_drops():
    shape = PoolShape(n_classes=30, candidates_per_class=20, originals_per_class=10, positive_controls=10, negative_controls=4,
                      grid=20, annotators=10, workers=60, spammer_fraction=0.1, rejected_fraction=0.0)
    pool = make_synthetic_pool(1, shape)
    _, report = compute_selection_frequencies(pool.annotations(), pool.originals_table(), min_control_accuracy=0.65)
    dropped = {w["worker_id"] for w in report["worker_filter"]["dropped"]}
    spammers = {f"W{w:06d}" for w in np.flatnonzero(pool.worker_is_spammer)}
    assert dropped == spammers and len(spammers) > 0


def test_stage_command_writes_table_and_report(tmp_path, capsys):
    folder = tmp_path / "pool"
    write_table(from_rows([{"candidate_id": cid(0), "wnid": A}, {"candidate_id": cid(1), "wnid": B}], "candidates"), folder / POOL_FILES["candidates"])
    write_table(ORIGINALS, folder / POOL_FILES["originals"])
    write_table(from_rows(ROWS, "annotations"), folder / POOL_FILES["annotations"])
    write_table(from_rows([], "images"), folder / POOL_FILES["images"])
    assert main(["selection-frequency", str(folder), "--min-control-accuracy", "0.5"]) == 0
    assert '"dropped_workers": [\n    "W3"\n  ]' in capsys.readouterr().out
    table = read_table(folder / "selection_frequencies.parquet", "selection_frequencies")
    assert as_dict(table)[(cid(0), A)] == (2, 1, False)
    assert json.loads((folder / "selection_frequencies.json").read_text())["worker_filter"]["min_control_accuracy"] == 0.5
    first = (folder / "selection_frequencies.parquet").read_bytes()
    assert main(["selection-frequency", str(folder), "--min-control-accuracy", "0.5"]) == 0
    assert (folder / "selection_frequencies.parquet").read_bytes() == first  # deterministic, safe to re-run
    assert main(["selection-frequency", str(tmp_path / "nowhere")]) == 1
    assert "is not a pool folder" in capsys.readouterr().err

"""Ingest: batch-results CSV and JSON into the annotation table; bad input names the row."""

import csv
import json
from importlib import resources

import pyarrow.parquet as pq
import pytest
from helpers_rebuild import A, B, cid, val

from pipeline.__main__ import main
from pipeline.rebuild.ingest import RESULTS_CSV_COLUMNS, IngestError, ingest, load_pool, read_candidates
from pipeline.toys.synthetic import tiny_jpeg

HEADER = ["HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.wnid", "Input.images", "Answer.selected", "Approve"]


def write_csv(path, rows, header=HEADER):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def inputs(tmp_path):
    """Three candidates (two of A, one of B), two originals, and a folder of images."""
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text(
        "\n".join(json.dumps({"id_ours": cid(i), "wnid": w, "width": "640" if i == 0 else None, "height": None, "id_search_engine": str(100 + i)})
                  for i, w in enumerate([A, A, B])) + "\n"
    )
    originals = tmp_path / "originals.csv"
    originals.write_text(f"image_id,wnid\n{val(1)},{A}\n{val(2)},{B}\n")
    images = tmp_path / "images"
    (images / "sub").mkdir(parents=True)
    for i in range(3):
        (images / ("sub" if i else "") / f"{cid(i)}.jpeg").write_bytes(tiny_jpeg(i))
    return tmp_path, candidates, originals, images


def row(hit, assignment, worker, status, wnid, shown, selected):
    return [hit, "T", assignment, worker, status, wnid, json.dumps(shown), ",".join(selected), ""]


def test_batch_results_csv_becomes_one_row_per_image_shown(inputs):
    folder, candidates, originals, images = inputs
    results = write_csv(folder / "batch.csv", [
        row("H1", "A1", "W1", "Approved", A, [cid(0), cid(1), val(1), val(2)], [cid(0), val(1)]),
        row("H1", "A2", "W2", "Rejected", A, [cid(0), cid(1), val(1), val(2)], []),
        row("H2", "A3", "W1", "Submitted", B, [cid(2), val(2)], [cid(2), val(2)]),
    ])
    report = ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)
    assert report["assignments"] == {"total": 3, "Submitted": 1, "Approved": 1, "Rejected": 1}
    assert report["annotation_rows"] == 10 and report["workers"] == 2 and report["tasks"] == 2
    pool = load_pool(folder / "pool")
    rows = pool.annotations.to_pylist()
    assert rows[0] == {"assignment_id": "A1", "hit_id": "H1", "worker_id": "W1", "status": "Approved", "image_id": cid(0), "wnid": A, "selected": True}
    assert [r["selected"] for r in rows[:4]] == [True, False, True, False]
    assert pool.candidates.column("width").to_pylist() == [640, None, None]
    # the image store: paths relative to the pool folder, resolvable from there
    store = pool.image_bytes()
    assert sorted(store) == [cid(0), cid(1), cid(2)]
    assert store[cid(2)].read_bytes() == tiny_jpeg(2)
    assert not pq.read_table(folder / "pool" / "images.parquet").column("path")[0].as_py().startswith("/")


def test_json_results_and_an_embedded_image_table(inputs):
    import pyarrow as pa

    folder, candidates, originals, _ = inputs
    results = folder / "results.json"
    results.write_text(json.dumps([{"assignment_id": "A9", "hit_id": "H9", "worker_id": "W9", "status": "Approved", "wnid": B,
                                    "images": [cid(2), val(1)], "selected": [cid(2)]}]))
    table = folder / "images.parquet"
    pq.write_table(pa.table({"candidate_id": [cid(2)], "image": [tiny_jpeg(5)]}), table)
    ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=table)
    pool = load_pool(folder / "pool")
    assert pool.annotations.column("selected").to_pylist() == [True, False]
    assert pool.image_bytes() == {cid(2): tiny_jpeg(5)}


@pytest.mark.parametrize(
    "rows, message",
    [
        ([row("H1", "A1", "W1", "Approved", A, [cid(0)], []), row("H1", "A1", "W2", "Approved", A, [cid(1)], [])],
         "batch.csv line 3: duplicate assignment A1 (first at batch.csv line 2)"),
        ([row("H1", "A1", "W1", "Approved", "n00000000", [cid(0)], [])], "batch.csv line 2 (assignment A1): unknown wnid 'n00000000'"),
        ([row("H1", "A1", "W1", "Approved", A, [cid(0), "f" * 40], [])], "batch.csv line 2 (assignment A1): unknown image id"),
        ([row("H1", "A1", "W1", "Approved", A, [cid(0)], [cid(1)])], "selected image(s) that were not shown"),
        ([row("H1", "A1", "W1", "Accepted", A, [cid(0)], [])], "status 'Accepted' is not one of"),
        ([row("H1", "A1", "W1", "Approved", A, [cid(0), cid(0)], [])], "shown twice"),
        ([["H1", "T", "A1", "W1", "Approved", A, "[oops", "", ""]], "batch.csv line 2: images looks like a JSON array but is not valid JSON"),
    ],
)
def test_bad_results_name_the_line(inputs, rows, message):
    folder, candidates, originals, _ = inputs
    results = write_csv(folder / "batch.csv", rows)
    with pytest.raises(IngestError) as error:
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])
    assert message in str(error.value)
    assert not (folder / "pool").exists()  # nothing half-written


def test_missing_csv_columns_are_listed(inputs):
    folder, candidates, originals, _ = inputs
    results = write_csv(folder / "batch.csv", [["H1", "A1"]], header=["HITId", "AssignmentId"])
    with pytest.raises(IngestError, match="missing column\\(s\\) WorkerId, AssignmentStatus, Input.wnid, Input.images, Answer.selected"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])
    assert set(RESULTS_CSV_COLUMNS.values()) <= set(HEADER)


def test_duplicate_assignment_across_files(inputs):
    folder, candidates, originals, _ = inputs
    first = write_csv(folder / "one.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0)], [])])
    second = write_csv(folder / "two.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0)], [])])
    with pytest.raises(IngestError, match="two.csv line 2: duplicate assignment A1 \\(first at one.csv line 2\\)"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[first, second])


@pytest.mark.parametrize(
    "lines, message",
    [
        ([{"id_ours": cid(0), "wnid": A}, {"id_ours": cid(0), "wnid": B}], "c.jsonl line 2: duplicate candidate id"),
        ([{"id_ours": cid(0), "wnid": "dog"}], "c.jsonl line 1: unknown wnid 'dog'"),
        ([{"id_ours": "IMG_001", "wnid": A}], "c.jsonl line 1: candidate id 'IMG_001' is not a 40-character"),
        ([{"id_ours": cid(0), "wnid": A, "width": "wide"}], "c.jsonl line 1: width is 'wide'"),
    ],
)
def test_bad_candidates_name_the_line(tmp_path, lines, message):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(IngestError, match=message.replace("(", "\\(").replace(")", "\\)")):
        read_candidates(path)


def test_image_files_must_be_known_candidates(inputs):
    folder, candidates, originals, images = inputs
    (images / f"{'e' * 40}.jpeg").write_bytes(tiny_jpeg(9))
    results = write_csv(folder / "batch.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0)], [])])
    with pytest.raises(IngestError, match="no candidate has the id 'eeee"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)


def test_released_candidate_records_read():
    table = read_candidates(resources.files("imagenetv2") / "data/candidates_in_final_sets.jsonl")
    assert table.num_rows == 4745
    rows = {r["candidate_id"]: r for r in table.to_pylist()}
    record = rows["a93094d8cd98f17e56a1ba6744709598c5e6ca74"]  # the file's first line
    assert (record["wnid"], record["id_search_engine"], record["width"], record["search_key"]) == ("n01498041", "4883924079", 2576, "stingray")


def test_ingest_command(inputs, capsys):
    folder, candidates, originals, images = inputs
    results = write_csv(folder / "batch.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0), val(1)], [cid(0)])])
    argv = ["ingest", "--candidates", str(candidates), "--originals", str(originals), "--results", str(results), "--images", str(images), "--output", str(folder / "pool")]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.rsplit("}", 1)[0] + "}")["annotation_rows"] == 2
    assert main(argv) == 0  # safe to re-run: the pool is replaced
    bad = write_csv(folder / "bad.csv", [row("H1", "A1", "W1", "Approved", "n1", [cid(0)], [])])
    assert main(argv[:6] + [str(bad)] + argv[7:]) == 1
    assert "bad.csv line 2" in capsys.readouterr().err
    assert load_pool(folder / "pool").annotations.num_rows == 2  # the previous pool is intact

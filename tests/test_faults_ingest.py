"""Issue 11, ingest: never replace what ingest did not write; every bad input names itself."""

import json
import logging
import os
import stat

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_rebuild import A, B, cid, val
from test_ingest import HEADER, row, write_csv

from pipeline.__main__ import main
from pipeline.core.ownership import MARKER, OutputError, owner
from pipeline.rebuild.ingest import IngestError, ingest, load_pool
from pipeline.rebuild.records import RecordError
from pipeline.toys.synthetic import tiny_jpeg


@pytest.fixture
def inputs(tmp_path):
    """Three candidates (two of A, one of B), two originals, a folder of images and one results CSV."""
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("\n".join(json.dumps({"id_ours": cid(i), "wnid": w}) for i, w in enumerate([A, A, B])) + "\n")
    originals = tmp_path / "originals.csv"
    originals.write_text(f"image_id,wnid\n{val(1)},{A}\n{val(2)},{B}\n")
    images = tmp_path / "images"
    images.mkdir()
    for i in range(3):
        (images / f"{cid(i)}.jpeg").write_bytes(tiny_jpeg(i))
    results = write_csv(tmp_path / "batch.csv", [row("H1", "A1", "W1", "Approved", A, [cid(0), cid(1), val(1)], [cid(0)])])
    return tmp_path, candidates, originals, images, results


def argv(candidates, originals, results, output, *more):
    return ["ingest", "--candidates", str(candidates), "--originals", str(originals), "--results", str(results), "--output", str(output), *more]


# --- data loss ---------------------------------------------------------------------------------


def test_existing_folder_with_the_users_files_is_refused_and_kept(inputs, capsys):
    folder, candidates, originals, images, results = inputs
    thesis = folder / "work" / "thesis.tex"
    thesis.parent.mkdir()
    thesis.write_text("\\chapter{mine}")
    assert main(argv(candidates, originals, results, folder / "work")) == 1
    err = capsys.readouterr().err
    assert f"refusing to replace {folder / 'work'}" in err and "pass another --output, or remove it yourself" in err
    assert thesis.read_text() == "\\chapter{mine}"
    assert sorted(p.name for p in (folder / "work").iterdir()) == ["thesis.tex"]


def test_existing_file_given_as_output_is_refused_and_kept(inputs, capsys):
    folder, candidates, originals, images, results = inputs
    target = folder / "pool.txt"
    target.write_text("my notes")
    assert main(argv(candidates, originals, results, target)) == 1
    assert "a file of that name exists" in capsys.readouterr().err
    assert target.read_text() == "my notes"


@pytest.mark.parametrize("where", ["images", "images/pool", "."])
def test_output_that_is_inside_or_holds_an_input_is_refused_before_any_work(inputs, where):
    folder, candidates, originals, images, results = inputs
    output = folder / where
    before = sorted(str(p) for p in folder.rglob("*"))
    with pytest.raises(OutputError, match="it is, contains or lies inside the input"):
        ingest(output, candidates=candidates, originals=originals, results=[results], images=images)
    assert sorted(str(p) for p in folder.rglob("*")) == before


def test_a_pool_is_marked_and_replaced_but_another_commands_output_is_not(inputs):
    folder, candidates, originals, images, results = inputs
    ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)
    record = owner(folder / "pool")
    assert record["command"] == "ingest" and record["project"] == "imagenetv2-hf" and "version" in record
    ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)  # ours: replaced
    (folder / "sets").mkdir()
    (folder / "sets" / MARKER).write_text(json.dumps({"project": "imagenetv2-hf", "command": "build-set", "version": "0.1.0"}))
    (folder / "sets" / "build-set.json").write_text("{}")
    with pytest.raises(OutputError, match="it is a build-set output, not an ingest output"):
        ingest(folder / "sets", candidates=candidates, originals=originals, results=[results])
    assert (folder / "sets" / "build-set.json").read_text() == "{}"


def test_pool_files_respect_the_umask(inputs):
    folder, candidates, originals, images, results = inputs
    old = os.umask(0o022)
    try:
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "pool").stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "pool" / "candidates.parquet").stat().st_mode) == 0o644


# --- input checks ------------------------------------------------------------------------------


def test_header_only_results_csv_warns_and_strict_refuses(inputs, caplog, capsys):
    folder, candidates, originals, images, _ = inputs
    empty = write_csv(folder / "empty.csv", [])
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        report = ingest(folder / "pool", candidates=candidates, originals=originals, results=[empty])
    assert report["annotation_rows"] == 0
    assert any("empty.csv: no assignments (the file has no rows besides its header)" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    assert main(argv(candidates, originals, empty, folder / "strict-pool", "--strict")) == 1
    assert "empty.csv: no assignments" in capsys.readouterr().err
    assert not (folder / "strict-pool").exists()


def test_image_file_that_is_not_an_image_is_refused_by_name(inputs):
    folder, candidates, originals, images, results = inputs
    bad = images / f"{cid(1)}.jpeg"
    bad.write_bytes(b"<html><body>rate limit exceeded</body></html>")
    with pytest.raises(IngestError, match=f"{cid(1)}.jpeg: not an image \\(not a JPEG or PNG file: starts with b'<html><b'\\)"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)
    assert not (folder / "pool").exists()


def test_image_table_row_that_is_not_an_image_is_refused_by_row(inputs):
    folder, candidates, originals, images, results = inputs
    table = folder / "images.parquet"
    pq.write_table(pa.table({"candidate_id": [cid(0), cid(2)], "image": [tiny_jpeg(0), b""]}), table)
    with pytest.raises(IngestError, match=f"images.parquet row 2 \\(candidate {cid(2)}\\): not an image .*empty"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=table)


def test_png_images_are_accepted(inputs):
    import io

    from PIL import Image

    folder, candidates, originals, images, results = inputs
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, "PNG")
    (images / f"{cid(2)}.jpeg").unlink()
    (images / f"{cid(2)}.png").write_bytes(buffer.getvalue())
    assert ingest(folder / "pool", candidates=candidates, originals=originals, results=[results], images=images)["image_files"] == 3


def test_latin1_results_csv_names_the_file_and_line(inputs, capsys):
    folder, candidates, originals, images, _ = inputs
    latin = folder / "latin.csv"
    lines = [",".join(HEADER), ",".join(row("H1", "A1", "W1", "Approved", A, [cid(0)], [])).replace('"', ""), "H2,Caf\xe9,A2"]
    latin.write_bytes("\n".join(lines).encode("latin-1"))
    assert main(argv(candidates, originals, latin, folder / "pool")) == 1
    err = capsys.readouterr().err
    assert "latin.csv line 3: not UTF-8 text (byte 0xe9" in err and "save the file as UTF-8" in err


def test_latin1_candidates_csv_names_the_file(inputs):
    folder, _, originals, images, results = inputs
    candidates = folder / "candidates.csv"
    candidates.write_bytes(f"candidate_id,wnid,search_key\n{cid(0)},{A},Ni\xf1o\n".encode("latin-1"))
    with pytest.raises(RecordError, match="candidates.csv line 2: not UTF-8 text \\(byte 0xf1"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])


def test_short_csv_row_names_the_missing_columns(inputs):
    folder, candidates, originals, images, _ = inputs
    short = write_csv(folder / "short.csv", [["H1", "T", "A1", "W1", "Approved"]])
    with pytest.raises(RecordError) as error:
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[short])
    message = str(error.value)
    assert "short.csv line 2: the row is short: 5 of 9 cells, no value for Input.wnid, Input.images, Answer.selected, Approve" in message
    assert "None" not in message


def test_short_originals_row_names_the_missing_column(inputs):
    folder, candidates, _, images, results = inputs
    originals = folder / "originals.csv"
    originals.write_text(f"image_id,wnid\n{val(1)},{A}\n{val(2)}\n")
    with pytest.raises(RecordError, match="originals.csv line 3: the row is short: 1 of 2 cells, no value for wnid"):
        ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])


# --- formats of the original pipeline ------------------------------------------------------------


def test_mturk_answers_joined_with_a_bar(inputs):
    folder, candidates, originals, images, _ = inputs
    results = write_csv(folder / "mturk.csv", [
        ["H1", "T", "A1", "W1", "Approved", A, f"{cid(0)}|{cid(1)}|{val(1)}", f"{cid(0)}|{val(1)}", ""],
    ])
    ingest(folder / "pool", candidates=candidates, originals=originals, results=[results])
    rows = load_pool(folder / "pool").annotations.to_pylist()
    assert [(r["image_id"], r["selected"]) for r in rows] == [(cid(0), True), (cid(1), False), (val(1), True)]

"""Issue 11, selection-frequency: never overwrite the pool's own tables or a user's file."""

import json

import pytest
from helpers_rebuild import A, B, cid, val

from pipeline.__main__ import main
from pipeline.rebuild.pool import POOL_FILES
from pipeline.rebuild.selection_frequency import selection_frequency_stage
from pipeline.rebuild.tables import from_rows, write_table


@pytest.fixture
def pool(tmp_path):
    folder = tmp_path / "pool"
    rows = [dict(assignment_id=f"a{i}", hit_id="h", worker_id=f"w{i}", status="Approved", image_id=cid(0), wnid=A, selected=i % 2 == 0)
            for i in range(3)]
    write_table(from_rows([{"candidate_id": cid(0), "wnid": A}, {"candidate_id": cid(1), "wnid": B}], "candidates"), folder / POOL_FILES["candidates"])
    write_table(from_rows([{"image_id": val(1), "wnid": A}], "originals"), folder / POOL_FILES["originals"])
    write_table(from_rows(rows, "annotations"), folder / POOL_FILES["annotations"])
    write_table(from_rows([], "images"), folder / POOL_FILES["images"])
    return folder


@pytest.mark.parametrize("table", ["candidates", "annotations", "originals", "images"])
def test_output_naming_one_of_the_pools_tables_is_refused(pool, capsys, table):
    target = pool / POOL_FILES[table]
    before = target.read_bytes()
    assert main(["selection-frequency", str(pool), "--output", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"refusing to write {target}: it is, contains or lies inside the input {target}" in err
    assert target.read_bytes() == before
    assert not (pool / f"{target.stem}.json").exists()


def test_output_that_is_the_users_file_is_refused_before_any_work(pool, tmp_path):
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(b"PAR1 mine")
    with pytest.raises(ValueError, match="refusing to replace .*mine.parquet: it exists and was not written by this project"):
        selection_frequency_stage(pool, mine)
    assert mine.read_bytes() == b"PAR1 mine"


def test_a_users_file_where_the_report_goes_is_refused_and_nothing_is_written(pool, tmp_path):
    (tmp_path / "sf.json").write_text("my notes")
    with pytest.raises(ValueError, match="refusing to replace .*sf.json"):
        selection_frequency_stage(pool, tmp_path / "sf.parquet")
    assert (tmp_path / "sf.json").read_text() == "my notes" and not (tmp_path / "sf.parquet").exists()


def test_output_must_be_parquet(pool):
    with pytest.raises(ValueError, match="--output must name a .parquet file"):
        selection_frequency_stage(pool, pool / "ingest.json")


def test_rerun_replaces_its_own_outputs_elsewhere(pool, tmp_path):
    out = tmp_path / "elsewhere" / "sf.parquet"
    selection_frequency_stage(pool, out)
    first = out.read_bytes()
    selection_frequency_stage(pool, out)
    assert out.read_bytes() == first
    assert json.loads((out.parent / "sf.json").read_text())["annotation_rows"]["total"] == 3

"""The data model: declared schemas, conformance errors, readers; and the rebuild modules' doctests."""

import doctest
import importlib
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.rebuild.tables import TABLES, conform, from_rows, read_any, read_table, schema, write_table

REBUILD_MODULES = [
    "pipeline.rebuild.tables",
    "pipeline.rebuild.ingest",
    "pipeline.rebuild.selection_frequency",
    "pipeline.rebuild.sampling_rules",
    "pipeline.rebuild.near_duplicate_rules",
    "pipeline.rebuild.revision",
    "pipeline.toys.synthetic_pool",
    "pipeline.toys.simulate",
]


@pytest.mark.parametrize("name", REBUILD_MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_column_is_documented_in_the_schema_and_the_docs(name):
    docs = (Path(__file__).parents[1] / "docs" / "rebuilding.md").read_text("utf-8")
    for field in schema(name):
        assert field.metadata[b"doc"], f"{name}.{field.name} has no doc"
        assert f"`{field.name}`" in docs, f"docs/rebuilding.md does not describe {name}.{field.name}"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_parquet_round_trip(tmp_path, name):
    empty = from_rows([], name)
    assert empty.schema.names == [c.name for c in TABLES[name]]
    path = write_table(empty, tmp_path / f"{name}.parquet")
    assert read_table(path, name).schema == schema(name)


def test_conform_names_missing_columns_and_empty_values():
    with pytest.raises(ValueError, match="t.parquet: missing column\\(s\\) wnid; a originals table needs image_id, wnid"):
        conform(pa.table({"image_id": ["x"]}), "originals", "t.parquet")
    with pytest.raises(ValueError, match="column wnid has 1 empty value"):
        conform(pa.table({"image_id": ["x"], "wnid": pa.array([None], pa.string())}), "originals", "t")
    with pytest.raises(ValueError, match="column num_shown cannot be read as int64"):
        conform(pa.table({"image_id": ["x"], "wnid": ["w"], "is_original": [True], "num_shown": ["many"], "num_selected": [1],
                          "selection_frequency": [1.0]}), "selection_frequencies", "t")


def test_read_any_reads_csv_with_the_declared_types(tmp_path):
    path = tmp_path / "review.csv"
    path.write_text("candidate_id,l2,fc7,dssim,extra\n" + "a" * 40 + ",1.5e8,14000,0.3,ignored\n")
    table = read_any(path, "near_duplicate_review")
    assert table.schema == schema("near_duplicate_review")
    assert table.to_pylist() == [{"candidate_id": "a" * 40, "l2": 1.5e8, "fc7": 14000.0, "dssim": 0.3}]
    with pytest.raises(ValueError, match="unsupported file type '.xlsx'"):
        (tmp_path / "x.xlsx").write_text("")
        read_any(tmp_path / "x.xlsx", "near_duplicates")


def test_unknown_table():
    with pytest.raises(ValueError, match="unknown table 'votes'"):
        schema("votes")

"""The data model of a rebuild: plain Parquet tables with documented schemas.

Every table a stage reads or writes is declared once here as data (:data:`TABLES`): its columns,
their Arrow types, whether they may be null, and what they mean. ``docs/rebuilding.md`` shows the
same declarations (:func:`schema_markdown` renders them). A pool folder written by ``ingest``
holds the first four tables; later stages add the others.

========================  ========================================================================
table                     one row per
========================  ========================================================================
``candidates``            candidate image (a Flickr photo found for one class)
``originals``             original ImageNet validation image shown as a control
``annotations``           image shown in one assignment (task instance done by one worker)
``images``                candidate with an image (the image store: a file path or the bytes)
``selection_frequencies`` (image, class) pair shown at least once in a counted assignment
``near_duplicates``       confirmed near-duplicate pair (input of ``sample``)
``near_duplicate_review`` candidate whose nearest neighbours were reviewed (input of ``sample``)
``decisions``             candidate, with what a sampling rule decided about it
========================  ========================================================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence, Union

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.atomic import atomic_file

PathLike = Union[str, "os.PathLike[str]"]


class Column(NamedTuple):
    name: str
    type: pa.DataType
    nullable: bool
    doc: str


# Assignment statuses on the crowd platform; only the first two count.
COUNTED_STATUSES = ("Submitted", "Approved")
STATUSES = COUNTED_STATUSES + ("Rejected",)

# Source record fields of a candidate, as in candidates_in_final_sets.jsonl (id_ours, wnid aside).
SOURCE_FIELDS: tuple[Column, ...] = (
    Column("id_search_engine", pa.string(), True, "photo id on the search engine (Flickr)"),
    Column("url", pa.string(), True, "where the image was downloaded from"),
    Column("url_type", pa.string(), True, "which Flickr size the url is (url_o, url_l, ...)"),
    Column("search_key", pa.string(), True, "the search query that found the image"),
    Column("search_engine", pa.string(), True, "the search engine (flickr)"),
    Column("uploader", pa.string(), True, "who ran the search"),
    Column("date_taken", pa.string(), True, "when the photo was taken, as the search engine reports it"),
    Column("date_upload_search_engine", pa.string(), True, "when the photo was uploaded to the search engine"),
    Column("date_upload_our_db", pa.string(), True, "when the record entered the candidate database"),
    Column("width", pa.int32(), True, "image width in pixels, if the search engine reported it"),
    Column("height", pa.int32(), True, "image height in pixels, if the search engine reported it"),
    Column("min_taken_date", pa.string(), True, "lower end of the search's taken-date window"),
    Column("max_taken_date", pa.string(), True, "upper end of the search's taken-date window"),
    Column("min_uploaded_date", pa.string(), True, "lower end of the search's upload-date window"),
    Column("max_uploaded_date", pa.string(), True, "upper end of the search's upload-date window"),
    Column("search_sort", pa.string(), True, "the search's sort order"),
    Column("max_images", pa.int32(), True, "how many results the search asked for"),
    Column("batch", pa.string(), True, "the download batch the candidate came in"),
    Column("source_filename", pa.string(), True, "the search-result file the record came from"),
    Column("search_step", pa.string(), True, "the search's expansion step that found it (lemmas, parent-word, ...; ours)"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "candidates": (
        Column("candidate_id", pa.string(), False, "40-hex SHA-1 id (``id_ours`` in the search records); unique"),
        Column("wnid", pa.string(), False, "the class the candidate was found for (an id of the class list, ImageNet-1k by default)"),
    )
    + SOURCE_FIELDS,
    "originals": (
        Column("image_id", pa.string(), False, "file name of an original validation image, e.g. ILSVRC2012_val_00049712.JPEG; unique"),
        Column("wnid", pa.string(), False, "its ImageNet label"),
    ),
    "annotations": (
        Column("assignment_id", pa.string(), False, "the assignment (one worker doing one task)"),
        Column("hit_id", pa.string(), False, "the task (HIT): one grid of images for one class"),
        Column("worker_id", pa.string(), False, "the worker who did the assignment"),
        Column("status", pa.string(), False, "Submitted, Approved or Rejected; only the first two count"),
        Column("image_id", pa.string(), False, "a candidate id or an original's file name"),
        Column("wnid", pa.string(), False, "the class the task asked about (the target wnid)"),
        Column("selected", pa.bool_(), False, "whether the worker selected the image as showing that class"),
    ),
    "images": (
        Column("candidate_id", pa.string(), False, "the candidate; unique"),
        Column("path", pa.string(), True, "its image file, relative to the folder holding the table (or absolute); null if embedded"),
        Column("image", pa.binary(), True, "the image file's bytes, if embedded instead of a path"),
    ),
    "selection_frequencies": (
        Column("image_id", pa.string(), False, "a candidate id or an original's file name"),
        Column("wnid", pa.string(), False, "the class asked about"),
        Column("is_original", pa.bool_(), False, "whether the image is an original validation image (a control)"),
        Column("num_shown", pa.int64(), False, "counted assignments that showed the image for this class"),
        Column("num_selected", pa.int64(), False, "of those, how many selected it"),
        Column("selection_frequency", pa.float64(), False, "num_selected / num_shown"),
    ),
    "near_duplicates": (
        Column("image_id", pa.string(), False, "a candidate id"),
        Column("duplicate_id", pa.string(), False, "a candidate id, or an original ImageNet file name (train or val)"),
    ),
    "near_duplicate_review": (
        Column("candidate_id", pa.string(), False, "the candidate; unique"),
        Column("l2", pa.float64(), False, "pixel-l2 distance up to which all its neighbours were reviewed"),
        Column("fc7", pa.float64(), False, "fc7-feature distance up to which all its neighbours were reviewed"),
        Column("dssim", pa.float64(), False, "DSSIM up to which all its neighbours were reviewed"),
    ),
    "decisions": (
        Column("candidate_id", pa.string(), False, "the candidate"),
        Column("wnid", pa.string(), False, "its class"),
        Column("num_annotations", pa.int64(), False, "counted assignments that showed it for its class"),
        Column("selection_frequency", pa.float64(), False, "its selection frequency for its class (0 if never shown)"),
        Column("bin", pa.int8(), True, "MatchedFrequency only: its selection-frequency bin (0 = lowest)"),
        Column("decision", pa.string(), False, "selected, not_sampled, or the exclusion reason"),
        Column("carried_over", pa.bool_(), False, "selected because the previous revision held it"),
        Column("upward_to_bin", pa.int8(), True, "MatchedFrequency only: the lower bin whose slot it filled"),
        Column("blacklist_reason", pa.string(), True, "blacklisted candidates: the reason the blacklist gives (null if none)"),
    ),
}


def schema(name: str) -> pa.Schema:
    """The Arrow schema of table ``name``, with each column's doc as field metadata.

    >>> schema("originals").names
    ['image_id', 'wnid']
    >>> schema("originals").field("wnid").metadata[b"doc"]
    b'its ImageNet label'
    """
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; the tables are {', '.join(TABLES)}")
    return pa.schema([pa.field(c.name, c.type, c.nullable, metadata={"doc": c.doc}) for c in TABLES[name]])


def conform(table: pa.Table, name: str, source: str, *, keep_dictionaries: bool = False) -> pa.Table:
    """``table`` with exactly the columns of table ``name``, in order and cast to their types.

    Missing required columns and nulls in non-null columns are errors naming ``source``;
    missing nullable columns become nulls; other columns are dropped. ``keep_dictionaries``
    leaves dictionary-encoded string columns encoded (faster for large tables).
    """
    target = schema(name)
    present = set(table.column_names)
    missing = [f.name for f in target if f.name not in present and not f.nullable]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {', '.join(missing)}; a {name} table needs "
            f"{', '.join(f.name for f in target if not f.nullable)}"
        )
    columns = []
    for field in target:
        if field.name not in present:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if keep_dictionaries and pa.types.is_dictionary(column.type) and column.type.value_type == field.type:
            if not field.nullable and column.null_count:
                raise ValueError(f"{source}: column {field.name} has {column.null_count} empty value(s); it must be filled")
            columns.append(column)
            continue
        try:
            column = column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValueError(f"{source}: column {field.name} cannot be read as {field.type}: {e}") from None
        if not field.nullable and column.null_count:
            raise ValueError(f"{source}: column {field.name} has {column.null_count} empty value(s); it must be filled")
        columns.append(column)
    if keep_dictionaries:
        return pa.Table.from_arrays(columns, names=target.names)
    return pa.Table.from_arrays(columns, schema=target)


def from_rows(rows: Sequence[Mapping[str, object]], name: str, source: str = "rows") -> pa.Table:
    """A table ``name`` from a list of dicts (missing nullable keys become nulls).

    >>> from_rows([{"image_id": "ILSVRC2012_val_00000001.JPEG", "wnid": "n01751748"}], "originals").num_rows
    1
    """
    target = schema(name)
    data = {f.name: [row.get(f.name) for row in rows] for f in target}
    try:
        table = pa.Table.from_pydict(data, schema=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ValueError(f"{source}: {e}") from None
    return conform(table, name, source)


def write_table(table: pa.Table, path: PathLike) -> Path:
    """Write ``table`` as Parquet to ``path`` atomically and return the path."""
    with atomic_file(path, "wb") as f:
        pq.write_table(table, f, compression="zstd")
    return Path(path)


def read_table(path: PathLike, name: str, *, dictionary: bool = False) -> pa.Table:
    """Read a Parquet file as table ``name`` (checked and cast by :func:`conform`).

    ``dictionary`` reads the string columns dictionary-encoded (much faster for the millions
    of repeated ids of an annotations table).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; it should hold the {name} table")
    strings = [c.name for c in TABLES[name] if c.type == pa.string()] if dictionary else None
    try:
        table = pq.read_table(path, read_dictionary=strings)
    except pa.ArrowInvalid as e:
        raise ValueError(f"{path} is not a readable Parquet file: {e}") from None
    return conform(table, name, str(path), keep_dictionaries=dictionary)


def read_any(path: PathLike, name: str) -> pa.Table:
    """Read table ``name`` from ``.parquet``, ``.csv`` (header row), ``.jsonl`` or a ``.json`` list of objects."""
    import json

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; it should hold the {name} table")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return read_table(path, name)
    if suffix == ".csv":
        from pyarrow import csv

        types = {c.name: c.type for c in TABLES[name]}
        try:
            table = csv.read_csv(path, convert_options=csv.ConvertOptions(column_types=types, strings_can_be_null=True))
        except pa.ArrowInvalid as e:
            raise ValueError(f"{path}: cannot read it as a {name} table: {e}") from None
        return conform(table, name, str(path))
    if suffix in (".json", ".jsonl"):
        text = path.read_text("utf-8")
        try:
            rows = json.loads(text) if suffix == ".json" else [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{path}: expected a list of objects with the columns of the {name} table")
        return from_rows(rows, name, str(path))
    raise ValueError(f"{path}: unsupported file type {suffix!r}; use .parquet, .csv, .jsonl or .json")


def schema_markdown(name: str) -> str:
    """The columns of table ``name`` as a markdown table (for the docs).

    >>> print(schema_markdown("originals"))
    | column | type | null | meaning |
    |---|---|---|---|
    | `image_id` | string | no | file name of an original validation image, e.g. ILSVRC2012_val_00049712.JPEG; unique |
    | `wnid` | string | no | its ImageNet label |
    """
    lines = ["| column | type | null | meaning |", "|---|---|---|---|"]
    for c in TABLES[name]:
        lines.append(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.doc} |")
    return "\n".join(lines)

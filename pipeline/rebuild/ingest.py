"""Ingest: candidate records, crowd annotation results and image files → a pool folder of tables.

A pool folder (the input of every later stage) holds the tables of :mod:`pipeline.rebuild.tables`::

    candidates.parquet   originals.parquet   annotations.parquet   images.parquet   ingest.json

Inputs:

- candidates: the search records, as ``.jsonl`` (like ``candidates_in_final_sets.jsonl``), a
  ``.json`` list, ``.csv`` or ``.parquet``; the id is ``candidate_id`` or ``id_ours``.
- originals: the original validation images used as controls, ``image_id`` and ``wnid``, as
  ``.csv``/``.jsonl``/``.parquet``, a ``.json`` list, or a ``.json`` object ``{image_id: wnid}``.
- results: the crowd platform's batch-results CSV (one row per assignment), mapped by
  :data:`RESULTS_CSV_COLUMNS`, or a ``.json`` list of assignments with the keys of that mapping.
  ``images`` (the image ids shown, in grid order) and ``selected`` (those the worker selected)
  are JSON arrays (``["a", "b"]``) or ids separated by ``,`` or ``|`` (how MTurk returns a
  multi-select field). A results file with no assignments is a warning (an error with ``strict``).
- images: a folder of image files named ``<candidate id>.<jpeg|jpg|png>`` (any depth; the pool
  records their paths), or a ``.parquet`` table of ``candidate_id`` and ``image`` (the file's
  bytes; the pool embeds them); every image must be a JPEG or PNG (:mod:`pipeline.rebuild.image_store`).

Every problem is an :class:`IngestError` that names the file and the line (CSV and JSON Lines),
item (JSON) or row (Parquet): duplicate ids, unknown wnids, images no table knows.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import pyarrow as pa

from pipeline.core.ownership import check_output_dir, owned_directory
from pipeline.rebuild.ingest_report import ingest_report as _ingest_report
from pipeline.rebuild.image_store import IMAGE_SUFFIXES, image_store_from_folder, image_store_from_table  # noqa: F401 (re-exported)
from pipeline.rebuild.pool import INGEST_REPORT, POOL_FILES, Pool, load_pool  # noqa: F401 (re-exported)
from pipeline.rebuild.records import RecordError, not_utf8, read_records
from pipeline.rebuild.stored_images import drop_failed, written_by_download
from pipeline.rebuild.stored_images import image_table as stored_image_table
from pipeline.rebuild.tables import STATUSES, from_rows, write_table

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

CANDIDATE_ID = re.compile(r"[0-9a-f]{40}")
ID_SEPARATORS = re.compile(r"[,|]")  # MTurk joins the values of a multi-select field with "|"

# Our field → the column of the batch-results CSV it is read from (MTurk's names).
RESULTS_CSV_COLUMNS = {
    "assignment_id": "AssignmentId",
    "hit_id": "HITId",
    "worker_id": "WorkerId",
    "status": "AssignmentStatus",
    "wnid": "Input.wnid",
    "images": "Input.images",
    "selected": "Answer.selected",
}


class IngestError(RecordError):
    """An input record is invalid; the message names the file and the record."""


# The class list of the running ingest (--classes; None = ImageNet-1k), set by _using_class_list.
_CLASS_LIST: ContextVar = ContextVar("ingest_class_list", default=None)


def _valid_wnids():
    from pipeline.rebuild.classes import imagenet_1k

    return _CLASS_LIST.get() or imagenet_1k()


def _using_class_list(function):
    @functools.wraps(function)
    def wrapper(*args, classes=None, **kwargs):
        token = _CLASS_LIST.set(classes)
        try:
            return function(*args, **kwargs)
        finally:
            _CLASS_LIST.reset(token)

    return wrapper


def _int_or_none(value, field: str, where: str):
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise IngestError(f"{where}: {field} is {value!r}; expected a whole number or empty")


def _check_wnid(wnid, where: str) -> str:
    classes = _valid_wnids()
    if wnid not in classes:
        raise IngestError(
            f"{where}: unknown wnid {wnid!r}; wnids must be one of the {len(classes)} classes of the class list "
            f"{classes.source} (pass --classes FILE for another class list)"
        )
    return wnid


def read_candidates(path: PathLike) -> pa.Table:
    """The candidates table from search records (``id_ours`` or ``candidate_id``, ``wnid``, source fields).

    >>> from importlib import resources
    >>> table = read_candidates(resources.files("imagenetv2") / "data/candidates_in_final_sets.jsonl")
    >>> table.num_rows, table.column("candidate_id")[0].as_py()
    (4745, 'a93094d8cd98f17e56a1ba6744709598c5e6ca74')
    """
    rows, first_seen = [], {}
    for where, record in read_records(path):
        row = dict(record)
        if "candidate_id" not in row and "id_ours" in row:
            row["candidate_id"] = row.pop("id_ours")
        cid = row.get("candidate_id")
        if not isinstance(cid, str) or not CANDIDATE_ID.fullmatch(cid):
            raise IngestError(
                f"{where}: candidate id {cid!r} is not a 40-character lowercase hex SHA-1 "
                f"(field candidate_id or id_ours); the release layout names files by it"
            )
        if cid in first_seen:
            raise IngestError(f"{where}: duplicate candidate id {cid} (first at {first_seen[cid]}); ids must be unique")
        first_seen[cid] = where
        _check_wnid(row.get("wnid"), where)
        for field in ("width", "height", "max_images"):
            row[field] = _int_or_none(row.get(field), field, where)
        for key, value in row.items():
            if value is not None and key not in ("width", "height", "max_images") and not isinstance(value, str):
                row[key] = str(value)
        rows.append(row)
    if not rows:
        raise IngestError(f"{path}: no candidates")
    return from_rows(rows, "candidates", str(path))


def read_originals(path: PathLike) -> pa.Table:
    """The originals table (image id → ImageNet label) from a file of ``image_id``, ``wnid`` records."""
    rows, first_seen = [], {}
    for where, record in read_records(path):
        if set(record) == {"key", "value"}:  # a {image_id: wnid} object
            record = {"image_id": record["key"], "wnid": record["value"]}
        image_id = record.get("image_id")
        if not isinstance(image_id, str) or not image_id:
            raise IngestError(f"{where}: missing image_id (the original's file name, e.g. ILSVRC2012_val_00000001.JPEG)")
        if image_id in first_seen:
            raise IngestError(f"{where}: duplicate image id {image_id} (first at {first_seen[image_id]})")
        first_seen[image_id] = where
        rows.append({"image_id": image_id, "wnid": _check_wnid(record.get("wnid"), where)})
    return from_rows(rows, "originals", str(path))


# --- annotation results -----------------------------------------------------------------------


def parse_id_list(value, field: str, where: str) -> list[str]:
    """Image ids from a JSON array, a string of ids separated by ``,`` or ``|`` (MTurk's multi-select), or a list.

    >>> parse_id_list('["a", "b"]', "images", "x"), parse_id_list("a, b", "images", "x"), parse_id_list(None, "selected", "x")
    (['a', 'b'], ['a', 'b'], [])
    >>> parse_id_list("a|b|c", "selected", "x")
    ['a', 'b', 'c']
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                raise IngestError(f"{where}: {field} looks like a JSON array but is not valid JSON ({e.msg})") from None
        else:
            return [part.strip() for part in ID_SEPARATORS.split(text) if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise IngestError(f"{where}: {field} must be a list of image ids (strings), got {value!r}")
    return value


class _AnnotationCollector:
    """Accumulates annotation rows from several result files, checking every assignment."""

    def __init__(self, known_images: set, first_assignment: Optional[dict] = None):
        self.known_images = known_images
        self.first_assignment = first_assignment if first_assignment is not None else {}
        self.columns: dict[str, list] = {k: [] for k in ("assignment_id", "hit_id", "worker_id", "status", "image_id", "wnid", "selected")}

    def add(self, where: str, fields: Mapping[str, object]) -> None:
        for key in ("assignment_id", "hit_id", "worker_id"):
            if not isinstance(fields.get(key), str) or not fields[key]:
                raise IngestError(f"{where}: missing {key}")
        assignment = fields["assignment_id"]
        if assignment in self.first_assignment:
            raise IngestError(
                f"{where}: duplicate assignment {assignment} (first at {self.first_assignment[assignment]}); "
                f"each assignment may appear once across all result files"
            )
        self.first_assignment[assignment] = where
        status = fields.get("status")
        if status not in STATUSES:
            raise IngestError(f"{where} (assignment {assignment}): status {status!r} is not one of {', '.join(STATUSES)}")
        wnid = _check_wnid(fields.get("wnid"), f"{where} (assignment {assignment})")
        images = parse_id_list(fields.get("images"), "images", where)
        selected = set(parse_id_list(fields.get("selected"), "selected", where))
        if not images:
            raise IngestError(f"{where} (assignment {assignment}): no images shown")
        if len(set(images)) != len(images):
            repeated = sorted({i for i in images if images.count(i) > 1})
            raise IngestError(f"{where} (assignment {assignment}): image(s) shown twice: {', '.join(repeated)}")
        unknown = [i for i in images if i not in self.known_images]
        if unknown:
            raise IngestError(
                f"{where} (assignment {assignment}): unknown image id(s) {', '.join(unknown[:5])}"
                f"{' ...' if len(unknown) > 5 else ''}; every shown image must be a candidate or an original "
                f"(add it to the candidates or originals file)"
            )
        not_shown = selected.difference(images)
        if not_shown:
            raise IngestError(
                f"{where} (assignment {assignment}): selected image(s) that were not shown: {', '.join(sorted(not_shown))}"
            )
        n = len(images)
        c = self.columns
        c["assignment_id"].extend([assignment] * n)
        c["hit_id"].extend([fields["hit_id"]] * n)
        c["worker_id"].extend([fields["worker_id"]] * n)
        c["status"].extend([status] * n)
        c["image_id"].extend(images)
        c["wnid"].extend([wnid] * n)
        c["selected"].extend(i in selected for i in images)

    def table(self) -> pa.Table:
        from pipeline.rebuild.tables import schema

        return pa.Table.from_pydict(self.columns, schema=schema("annotations"))


def _csv_header(path: Path) -> list[str]:
    with open(path, "rb") as f:
        first = f.readline()
    try:
        return next(csv.reader([first.decode("utf-8-sig")]), [])
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None


def _add_results_file(path: Path, collector: _AnnotationCollector, key=None) -> int:
    count = 0
    if key is not None:  # results of our own tasks (--tasks): public image names mapped back through the key
        for where, fields in key.assignments(path):
            collector.add(where, fields)
            count += 1
    elif path.suffix.lower() == ".csv":
        header = _csv_header(path)
        missing = [column for column in RESULTS_CSV_COLUMNS.values() if column not in (header or [])]
        if missing:
            raise IngestError(
                f"{path.name}: missing column(s) {', '.join(missing)}; a batch-results CSV needs "
                f"{', '.join(RESULTS_CSV_COLUMNS.values())} (see pipeline.rebuild.ingest.RESULTS_CSV_COLUMNS)"
            )
        for where, record in read_records(path):
            collector.add(where, {ours: record.get(theirs) for ours, theirs in RESULTS_CSV_COLUMNS.items()})
            count += 1
    elif path.suffix.lower() == ".json":
        for where, record in read_records(path):
            if set(record) == {"key", "value"}:
                raise IngestError(f"{path.name}: expected a JSON list of assignments, got an object")
            collector.add(where, record)
            count += 1
    else:
        raise IngestError(f"{path}: results must be a batch-results .csv or a .json list of assignments")
    return count


def read_results(paths: Sequence[PathLike], known_images: set, *, strict: bool = False, key=None) -> pa.Table:
    """The annotations table from batch-results CSVs and JSON files (one row per image shown).

    A file without a single assignment (a CSV with only its header row) is a warning, or with
    ``strict`` an error: it is more likely the wrong file, or a download cut short, than a batch
    nobody worked on. ``key``: a :class:`pipeline.rebuild.task_key.TaskKey` when the results are of our tasks.
    """
    collector = _AnnotationCollector(known_images)
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"results file {path} does not exist")
        n = _add_results_file(path, collector, key)
        if n == 0:
            message = f"{path}: no assignments (the file has no rows besides its header)"
            if strict:
                raise IngestError(f"{message}; pass the batch-results file with the workers' answers (or leave out --strict)")
            logger.warning("%s; the pool gets no annotations from it", message)
        logger.info("read %d assignments from %s", n, path.name)
    return collector.table()


@_using_class_list  # ingest(..., classes=ClassList): the class list the wnids must belong to (default ImageNet-1k)
def ingest(
    output: PathLike,
    *,
    candidates: PathLike,
    originals: PathLike,
    results: Sequence[PathLike],
    images: Optional[PathLike] = None,
    strict: bool = False,
    tasks: Sequence[PathLike] = (),
) -> dict:
    """Read the inputs, check them, and write the pool folder ``output`` atomically; return the report.

    ``output`` is checked first: it must be absent, empty, or a pool an earlier ``ingest`` wrote,
    and must not be, hold or lie inside an input. The report (also written as ``ingest.json``)
    counts candidates, originals, assignments per status, workers, tasks, annotation rows,
    candidates never shown and candidates without an image file, and records each input file's
    sha256. ``strict`` refuses a results file without assignments (otherwise a warning). ``tasks``:
    folders written by ``tasks``; the results name images by public names, mapped back through the key.
    """
    output = Path(output)
    inputs = [candidates, originals, *results, images, *tasks]
    check_output_dir(output, "ingest", inputs=inputs)
    candidate_table, failed_downloads = drop_failed(read_candidates(candidates), images)  # left out, with their reasons in the store
    original_table = read_originals(originals)
    candidate_ids = set(candidate_table.column("candidate_id").to_pylist())
    original_ids = set(original_table.column("image_id").to_pylist())
    clash = candidate_ids & original_ids
    if clash:
        raise IngestError(f"id(s) both a candidate and an original: {', '.join(sorted(clash)[:5])}")
    if not results and tasks:
        raise IngestError("--tasks given without results; pass the batch-results CSV of those tasks with --results")
    if not results:  # a pool before annotation: the input of `tasks`
        logger.warning("no results files: the pool has no annotations yet; make its tasks with `python -m pipeline tasks`")
    from pipeline.rebuild.task_key import TaskKey

    key = TaskKey.load(tasks) if tasks else None
    annotations = read_results(results, candidate_ids | original_ids, strict=strict, key=key)
    image_table = _image_store(images, candidate_ids, output)
    report = _ingest_report(candidate_table, original_table, annotations, image_table, candidates, originals, results, images)
    report["failed_downloads"] = failed_downloads
    report["classes"] = Path(_valid_wnids().source).name
    if key is not None:  # each worker's accuracy on the hidden controls (for selection-frequency's worker filter)
        report["worker_control_accuracy"] = key.tally.rows()
    with owned_directory(output, "ingest", inputs=inputs) as tmp:
        for name, table in (("candidates", candidate_table), ("originals", original_table), ("annotations", annotations), ("images", image_table)):
            write_table(table, tmp / POOL_FILES[name])
        (tmp / INGEST_REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    logger.info(
        "pool %s: %d candidates, %d originals, %d assignments, %d images",
        output, report["candidates"], report["originals"], report["assignments"]["total"], report["image_files"],
    )
    return report


def _image_store(images: Optional[PathLike], candidate_ids: set, output: Path) -> pa.Table:
    try:
        if images is None:
            return from_rows([], "images")
        if Path(images).is_file() and Path(images).suffix.lower() == ".parquet":
            return image_store_from_table(images, candidate_ids)
        if written_by_download(images):  # the store of `download`: the annotation copies
            return stored_image_table(images, candidate_ids, output)
        return image_store_from_folder(images, candidate_ids, output)
    except IngestError:
        raise
    except RecordError as e:
        raise IngestError(str(e)) from None

"""The shape of MTurk's batch files, shared by everything that writes or reads them.

A batch-results CSV has one row per assignment: MTurk's own columns (:data:`ASSIGNMENT_COLUMNS`),
then ``Input.<column>`` for every column of the batch input, then ``Answer.<field>`` for every
form field (``Answer.selected``: the chosen image URLs joined by ``|``). ``mturk collect``, the
local annotation page and the toys' simulated workers all write this shape, and ``ingest --tasks``
reads it.

>>> results_columns(["task_id", "image_1_url"])[-4:]
['Input.task_id', 'Input.image_1_url', 'Answer.selected', 'Answer.task']
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence, Union

from pipeline.rebuild.task_key import ANSWER_FIELD, ANSWER_SEPARATOR, BATCH_INPUT

PathLike = Union[str, "os.PathLike[str]"]

ASSIGNMENT_COLUMNS = (
    "HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime", "SubmitTime", "WorkTimeInSeconds",
)
ANSWER_COLUMNS = (f"Answer.{ANSWER_FIELD}", "Answer.task")


def read_batch_input(folder: PathLike) -> list[dict]:
    """The rows of ``folder/batch_input.csv`` (one per task), as dicts of strings."""
    path = Path(folder) / BATCH_INPUT
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; is {folder} a folder written by `python -m pipeline tasks`?")
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def results_columns(input_columns: Sequence[str]) -> list[str]:
    """The header of a batch-results CSV for a batch input with ``input_columns``."""
    return [*ASSIGNMENT_COLUMNS, *(f"Input.{c}" for c in input_columns), *ANSWER_COLUMNS]


def results_row(assignment: Mapping[str, object], batch_row: Mapping[str, str], selected: Iterable[str]) -> dict:
    """One results row: MTurk's assignment fields, the task's batch input, the answer joined by ``|``."""
    row = {c: "" if assignment.get(c) is None else str(assignment[c]) for c in ASSIGNMENT_COLUMNS}
    row.update({f"Input.{k}": v for k, v in batch_row.items()})
    row[f"Answer.{ANSWER_FIELD}"] = ANSWER_SEPARATOR.join(selected)
    row["Answer.task"] = batch_row.get("task_id", "")
    return row


def write_results(f, rows: Iterable[Mapping[str, str]], input_columns: Sequence[str]) -> None:
    """Write a batch-results CSV (header and ``rows``) to the open text file ``f``."""
    writer = csv.DictWriter(f, fieldnames=results_columns(input_columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)


def read_results(path: PathLike) -> list[dict]:
    """The rows of a batch-results CSV, as dicts of strings (empty when the file does not exist)."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))

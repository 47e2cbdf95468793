"""Reading records from the files a maintainer hands the pipeline: JSON Lines, JSON, CSV, Parquet.

Every record comes with ``where`` (``"file.csv line 3"``) so that errors name the file and the
record.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]


class RecordError(ValueError):
    """A file or one of its records cannot be read; the message names the file and the record."""


def read_records(path: PathLike) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` for each record of a ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file.

    ``where`` names the record for error messages (``"file.csv line 3"``). CSV values are strings,
    with empty cells as ``None``. A ``.json`` object (not a list) yields ``{"key": k, "value": v}``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise RecordError(f"{path.name} line {number}: not valid JSON ({e.msg})") from None
                if not isinstance(record, dict):
                    raise RecordError(f"{path.name} line {number}: expected a JSON object, got {type(record).__name__}")
                yield f"{path.name} line {number}", record
    elif suffix == ".json":
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise RecordError(f"{path.name}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if isinstance(data, dict):
            for key, value in data.items():
                yield f"{path.name} key {key!r}", {"key": key, "value": value}
        elif isinstance(data, list):
            for number, record in enumerate(data):
                if not isinstance(record, dict):
                    raise RecordError(f"{path.name} item {number}: expected a JSON object, got {type(record).__name__}")
                yield f"{path.name} item {number}", record
        else:
            raise RecordError(f"{path.name}: expected a JSON list of records or an object, got {type(data).__name__}")
    elif suffix == ".csv":
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            for record in reader:
                # reader.line_num is the line where the record ends (quoted cells may span lines)
                yield f"{path.name} line {reader.line_num}", {k: (v if v != "" else None) for k, v in record.items()}
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        for number, record in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield f"{path.name} row {number}", record
    else:
        raise RecordError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json, .csv or .parquet")

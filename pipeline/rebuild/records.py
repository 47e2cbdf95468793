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


def not_utf8(path: Path, error: UnicodeDecodeError) -> RecordError:
    """The error for a file that is not UTF-8, naming the first line that is not."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                byte = line[e.start]
                return RecordError(
                    f"{path.name} line {number}: not UTF-8 text (byte {byte:#04x}; Latin-1 or Windows-1252?); "
                    f"save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 {path.name} > fixed-{path.name}"
                )
    return RecordError(f"{path.name}: not UTF-8 text ({error.reason}); save the file as UTF-8")


def read_text(path: PathLike) -> str:
    """The UTF-8 text of ``path``; an error naming the file and line if it is not UTF-8."""
    path = Path(path)
    try:
        return path.read_text("utf-8-sig")
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None


def read_json(path: PathLike):
    """The JSON value in ``path``; an error naming the file, line and column if it is not valid JSON."""
    path = Path(path)
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise RecordError(f"{path.name}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def read_records(path: PathLike) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` for each record of a ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file.

    A file that is not UTF-8 (a Latin-1 CSV) is an error naming the file and the line; so is a CSV
    row with fewer or more cells than the header (naming the columns it lacks).
    """
    try:
        yield from _read_records(Path(path))
    except UnicodeDecodeError as e:
        raise not_utf8(Path(path), e) from None


def _csv_records(path: Path) -> Iterator[tuple[str, dict]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None) or []
        for cells in reader:
            # reader.line_num is the line where the record ends (quoted cells may span lines)
            where = f"{path.name} line {reader.line_num}"
            if not cells:
                continue
            if len(cells) < len(header):
                missing = header[len(cells):]
                raise RecordError(
                    f"{where}: the row is short: {len(cells)} of {len(header)} cells, no value for "
                    f"{', '.join(missing)}; every row needs a cell for each column of the header (empty is allowed)"
                )
            if len(cells) > len(header):
                raise RecordError(f"{where}: the row has {len(cells)} cells but the header has {len(header)} columns")
            yield where, {k: (v if v != "" else None) for k, v in zip(header, cells)}


def _read_records(path: Path) -> Iterator[tuple[str, dict]]:
    """``(where, record)`` for each record of a ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file.

    ``where`` names the record for error messages (``"file.csv line 3"``). CSV values are strings,
    with empty cells as ``None``. A ``.json`` object (not a list) yields ``{"key": k, "value": v}``.
    """
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
        data = read_json(path)
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
        yield from _csv_records(path)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        for number, record in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield f"{path.name} row {number}", record
    else:
        raise RecordError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json, .csv or .parquet")

"""The review files ``sample`` reads besides the pool, in our formats and the original pipeline's.

- the blacklist (candidates removed by the final review): the original JSON object
  ``{candidate_id: reason}`` (the reasons go into the decisions table), a JSON list of ids, a
  text file of one id per line, or a table with ``candidate_id`` (and optionally ``reason``);
- confirmed near-duplicates: the original ``near_duplicates.json``, ``{candidate_id: [reference
  ids]}`` whose references are candidates or ImageNet train, validation or test files, or a
  table of ``image_id``, ``duplicate_id``;
- near-duplicate overrides: a JSON list of candidate ids (or any blacklist format);
- the near-duplicate review table (``candidate_id``, ``l2``, ``fc7``, ``dssim``).

Every error names the file: invalid JSON with its line and column, text that is not UTF-8
with its line, a wrong shape with the key or item.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import pyarrow as pa

from pipeline.rebuild.records import read_json, read_records, read_text
from pipeline.rebuild.tables import from_rows, read_any

PathLike = Union[str, "os.PathLike[str]"]


def read_blacklist(path: PathLike) -> dict[str, Optional[str]]:
    """Candidate id → the review's reason (None where the file gives none), in the file's order.

    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "blacklist.json"
    >>> _ = path.write_text(json.dumps({"a" * 40: "cartoon", "b" * 40: "blurry"}))
    >>> read_blacklist(path)["a" * 40]
    'cartoon'
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _blacklist_json(path, read_json(path))
    if suffix in (".txt", ""):
        lines = read_text(path).splitlines()
        return {line.strip(): None for line in lines if line.strip() and not line.lstrip().startswith("#")}
    found: dict[str, Optional[str]] = {}
    for where, record in read_records(path):
        if not record.get("candidate_id"):
            raise ValueError(f"{where}: missing candidate_id")
        reason = record.get("reason")
        found[record["candidate_id"]] = None if reason is None else str(reason)
    return found


def _blacklist_json(path: Path, data) -> dict[str, Optional[str]]:
    if isinstance(data, dict):  # the original pipeline's {candidate_id: reason}
        bad = next(((k, v) for k, v in data.items() if v is not None and not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"{path.name} key {bad[0]!r}: the reason is {bad[1]!r}; a blacklist object maps candidate ids to reasons (text)")
        return dict(data)
    if isinstance(data, list) and all(isinstance(x, str) for x in data):
        return dict.fromkeys(data)
    raise ValueError(
        f"{path.name}: expected a JSON object {{candidate_id: reason}} or a list of candidate ids, got {type(data).__name__}"
        + (" with non-text items" if isinstance(data, list) else "")
    )


def read_id_list(path: PathLike) -> list[str]:
    """Candidate ids from a JSON list (or object), a text file (one per line) or a table with ``candidate_id``."""
    return list(read_blacklist(path))


def read_near_duplicates(path: PathLike) -> pa.Table:
    """Confirmed pairs from a table (``image_id``, ``duplicate_id``) or a JSON object {candidate: [references]}."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        data = read_json(path)
        if isinstance(data, dict):  # the original pipeline's near_duplicates.json
            rows = []
            for key, value in data.items():
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{path.name} key {key!r}: expected a list of its near-duplicates (ids or ImageNet file names)")
                rows.extend({"image_id": key, "duplicate_id": d} for d in value)
            return from_rows(rows, "near_duplicates", str(path))
    return read_any(path, "near_duplicates")


def read_review(path: PathLike) -> pa.Table:
    """The near-duplicate review table (how far each candidate's neighbours were reviewed).

    ``near-duplicates``' ``review_status.parquet`` (one row per candidate and measure) is read too.
    """
    import pyarrow.parquet as pq

    from pipeline.rebuild.near_duplicate_rules import review_table_from_status

    if Path(path).suffix.lower() == ".parquet" and Path(path).is_file() and "metric" in pq.read_schema(path).names:
        return review_table_from_status(pq.read_table(path, columns=["candidate_id", "metric", "reviewed_up_to"]))
    return read_any(path, "near_duplicate_review")

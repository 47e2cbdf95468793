"""ImageNetV2 rows as Arrow tables, a bounded batch at a time.

The builder and the Hub-ready export both consume these tables: ``datasets`` writes them to its
cache, the export to Parquet shards, with no per-example Python dict in between.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import pyarrow as pa

from .archive import Member
from .features import METADATA_FIELDS

BATCH_ROWS = 1000
BATCH_BYTES = 64 << 20  # image bytes per table: memory stays flat in the archive size


class RowBatch:
    """Collects rows; :meth:`full` says when to flush, :meth:`table` gives them as a table."""

    def __init__(self, schema: pa.Schema, wnids: list[str], records: Mapping[str, Mapping]):
        self.schema = schema
        self.wnids = wnids
        self.records = records
        self._clear()

    def _clear(self) -> None:
        self.images: list = []  # bytes, or memoryviews into the archive
        self.labels: list[int] = []
        self.candidate_ids: list[str] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.labels)

    def add(self, member: Member) -> None:
        self.images.append(member.data)
        self.labels.append(member.class_index)
        self.candidate_ids.append(member.candidate_id)
        self.nbytes += len(member.data)

    def full(self) -> bool:
        return len(self.labels) >= BATCH_ROWS or self.nbytes >= BATCH_BYTES

    def table(self) -> pa.Table:
        """The rows collected so far, in the features' schema; the batch starts empty again."""
        n = len(self.labels)
        # no path: datasets would store a path that happens to name a local file instead of the bytes
        image = pa.StructArray.from_arrays([binary_array(self.images), pa.nulls(n, pa.string())], names=["bytes", "path"])
        columns = {
            "image": image,
            "label": pa.array(self.labels, pa.int64()),
            "wnid": pa.array([self.wnids[c] for c in self.labels], pa.string()),
            "candidate_id": pa.array(self.candidate_ids, pa.string()),
        }
        columns.update(metadata_columns([self.records.get(c) for c in self.candidate_ids]))
        table = pa.Table.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)
        self._clear()
        return table


def binary_array(values: list) -> pa.Array:
    """A binary array of ``values`` (bytes or memoryviews) with one copy of the bytes.

    >>> binary_array([b"ab", b"", b"c"]).to_pylist()
    [b'ab', b'', b'c']
    """
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError(f"a batch of {len(values)} images holds {offsets[-1]} bytes; at most 2 GiB fit a binary array")
    data = b"".join(values)
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def metadata_columns(records: list[Optional[Mapping]]) -> dict[str, pa.Array]:
    """The search-record columns of rows whose records are ``records`` (None: no record)."""
    columns = {}
    for column, source in METADATA_FIELDS.items():
        values = [None if r is None else r.get(source) for r in records]
        if column in ("width", "height"):
            columns[column] = pa.array([None if v is None else int(v) for v in values], pa.int32())
        else:
            columns[column] = pa.array([None if v is None else str(v) for v in values], pa.string())
    return columns

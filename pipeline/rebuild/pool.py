"""The data model of a rebuild: the pool folder that ``ingest`` writes and every later stage reads.

A pool folder holds the tables of :mod:`pipeline.rebuild.tables`::

    candidates.parquet   originals.parquet   annotations.parquet   images.parquet   ingest.json
    selection_frequencies.parquet (+ .json, written by ``selection-frequency``)

This module is shared by the stages, so that no stage imports another to get at the pool.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import pyarrow as pa

from pipeline.rebuild.tables import read_table

PathLike = Union[str, "os.PathLike[str]"]

POOL_FILES = {
    "candidates": "candidates.parquet",
    "originals": "originals.parquet",
    "annotations": "annotations.parquet",
    "images": "images.parquet",
}
INGEST_REPORT = "ingest.json"
SELECTION_FREQUENCIES = "selection_frequencies.parquet"
SELECTION_FREQUENCIES_REPORT = "selection_frequencies.json"


@dataclass
class Pool:
    """The tables of a pool folder. ``root`` is the folder (image paths are relative to it)."""

    root: Path
    candidates: Optional[pa.Table] = None
    originals: Optional[pa.Table] = None
    annotations: Optional[pa.Table] = None
    images: Optional[pa.Table] = None

    def image_bytes(self) -> dict[str, "bytes | Path"]:
        """Candidate id → its image: the embedded bytes, or the path of its file."""
        store = {}
        columns = self.images.select(["candidate_id", "path", "image"]).to_pydict()
        for cid, rel, data in zip(columns["candidate_id"], columns["path"], columns["image"]):
            store[cid] = data if data is not None else (Path(rel) if os.path.isabs(rel) else self.root / rel)
        return store


def load_pool(folder: PathLike, tables: Sequence[str] = tuple(POOL_FILES), *, dictionary: bool = False) -> Pool:
    """Read (some of) the tables of a pool folder written by :func:`ingest`.

    ``dictionary`` keeps string columns dictionary-encoded (see :func:`pipeline.rebuild.tables.read_table`).
    """
    folder = Path(folder)
    if not (folder / POOL_FILES["candidates"]).is_file():
        raise FileNotFoundError(f"{folder} is not a pool folder (no {POOL_FILES['candidates']}); run `python -m pipeline ingest` first")
    unknown = set(tables) - set(POOL_FILES)
    if unknown:
        raise ValueError(f"unknown pool table(s) {', '.join(sorted(unknown))}; the tables are {', '.join(POOL_FILES)}")
    loaded = {name: read_table(folder / POOL_FILES[name], name, dictionary=dictionary) for name in tables}
    return Pool(root=folder, **loaded)

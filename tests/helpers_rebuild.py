"""Small hand-made pools for the rebuild tests (the tables of pipeline.rebuild.tables, built in memory)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from imagenetv2.classes import wnids
from pipeline.rebuild.ingest import Pool
from pipeline.rebuild.tables import from_rows

WNIDS = wnids()
A, B, C = WNIDS[0], WNIDS[1], WNIDS[2]


def cid(n: int) -> str:
    """A valid 40-hex candidate id whose sort order is the order of ``n``."""
    return f"{n:040x}"


def val(n: int) -> str:
    return f"ILSVRC2012_val_{n:08d}.JPEG"


def pool_with(candidates, originals=()) -> tuple[Pool, pa.Table]:
    """A pool and its selection-frequency table.

    ``candidates``: (id, wnid, num_shown, num_selected); ``originals``: (image id, wnid, shown, selected).
    """
    pool = Pool(
        root=Path("."),
        candidates=from_rows([{"candidate_id": c, "wnid": w} for c, w, _, _ in candidates], "candidates"),
        originals=from_rows([{"image_id": i, "wnid": w} for i, w, _, _ in originals], "originals"),
    )
    rows = [
        {"image_id": i, "wnid": w, "is_original": orig, "num_shown": n, "num_selected": s, "selection_frequency": s / n}
        for orig, group in ((False, candidates), (True, originals))
        for i, w, n, s in group
        if n > 0
    ]
    return pool, from_rows(rows, "selection_frequencies")

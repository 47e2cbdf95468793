"""A small pool on disk for the review app's tests: three classes, picture-like JPEGs, a first revision, neighbours.

Class A shows suns over hills, B boats on water, C trees in a field; each candidate is a
variation (position, size, colours). One candidate of B is a copy of an original of B
(a planted near-duplicate), so that the near-duplicate page has a true pair to confirm.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from imagenetv2.classes import wnids
from pipeline.rebuild.revision import SamplingConfig
from pipeline.rebuild.tables import from_rows, write_table

WNIDS = wnids()[:3]
CANDIDATES_PER_CLASS = 14
ORIGINALS_PER_CLASS = 12
PER_CLASS = 10


def _picture(kind: int, rng: np.random.Generator, size=(200, 150)) -> bytes:
    from PIL import Image, ImageDraw

    w, h = size
    sky = tuple(int(x) for x in rng.integers(90, 200, 3))
    ground = tuple(int(x) for x in rng.integers(30, 140, 3))
    image = Image.new("RGB", size, sky)
    draw = ImageDraw.Draw(image)
    horizon = int(h * rng.uniform(0.5, 0.75))
    for y in range(horizon):  # a soft sky gradient
        t = y / horizon
        draw.line([(0, y), (w, y)], fill=tuple(int(c * (1 - 0.35 * t) + 255 * 0.35 * t) for c in sky))
    x, r = rng.uniform(0.2, 0.8) * w, rng.uniform(0.08, 0.16) * w
    if kind == 0:  # a sun over hills
        draw.ellipse([x - r, horizon * 0.45 - r, x + r, horizon * 0.45 + r], fill=(250, 200, 60))
        draw.pieslice([-w * 0.3, horizon - h * 0.25, w * 0.7, horizon + h * 0.6], 180, 360, fill=ground)
        draw.pieslice([w * 0.3, horizon - h * 0.18, w * 1.3, horizon + h * 0.6], 180, 360, fill=tuple(min(255, c + 30) for c in ground))
        draw.rectangle([0, horizon, w, h], fill=ground)
    elif kind == 1:  # a boat on water
        draw.rectangle([0, horizon, w, h], fill=(40, 90, int(rng.integers(140, 200))))
        draw.polygon([(x - 2 * r, horizon), (x + 2 * r, horizon), (x + 1.4 * r, horizon + r * 0.7), (x - 1.4 * r, horizon + r * 0.7)], fill=(120, 60, 30))
        draw.polygon([(x, horizon - 2.4 * r), (x, horizon - 4), (x + 1.6 * r, horizon - 4)], fill=(245, 245, 240))
    else:  # trees in a field
        draw.rectangle([0, horizon, w, h], fill=(70, int(rng.integers(120, 170)), 60))
        for k in range(int(rng.integers(2, 5))):
            tx = (x + k * w * 0.22) % w
            draw.rectangle([tx - 4, horizon - r, tx + 4, horizon + 6], fill=(90, 60, 30))
            draw.ellipse([tx - r, horizon - 2.6 * r, tx + r, horizon - 0.6 * r], fill=(30, int(rng.integers(90, 140)), 40))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return out.getvalue()


@dataclass
class ReviewWorld:
    root: Path
    pool: Path
    originals: Path  # a Parquet table of image_id, image
    revision: Path
    near_duplicates: Path  # a folder with neighbours.parquet
    candidates: dict  # wnid → candidate ids (sorted by selection frequency, best first)
    duplicate: str  # the candidate of class B that copies an original
    duplicate_of: str


def cid(k: int, i: int) -> str:
    return f"{k + 1:02x}{i:038x}"


def make_world(root: Path, seed: int = 0) -> ReviewWorld:
    """Write the pool, the originals, a first revision (top-images, 10 per class) and a neighbours table."""
    from pipeline.rebuild.sample import sample_stage

    rng = np.random.default_rng(seed)
    pool = root / "pool"
    pool.mkdir(parents=True)
    candidates, images, originals, original_images, sf_rows, per_class = [], [], [], [], [], {}
    for k, wnid in enumerate(WNIDS):
        ids = [cid(k, i) for i in range(CANDIDATES_PER_CLASS)]
        per_class[wnid] = ids  # selection frequencies fall with i: the first 10 make the revision
        for i, c in enumerate(ids):
            candidates.append({"candidate_id": c, "wnid": wnid, "search_engine": "flickr", "id_search_engine": str(8_000_000_000 + 100 * k + i),
                               "search_key": ["sunset hill", "sailing boat", "oak tree"][k], "date_taken": f"2012-1{k}-0{1 + i % 9} 12:00:00",
                               "date_upload_search_engine": "1356998400", "width": 200, "height": 150})
            images.append({"candidate_id": c, "image": _picture(k, rng)})
            shown = 12
            sf_rows.append({"image_id": c, "wnid": wnid, "is_original": False, "num_shown": shown, "num_selected": shown - i // 2,
                            "selection_frequency": (shown - i // 2) / shown})
        for j in range(ORIGINALS_PER_CLASS):
            o = f"ILSVRC2012_val_{k * ORIGINALS_PER_CLASS + j + 1:08d}.JPEG"
            originals.append({"image_id": o, "wnid": wnid})
            original_images.append({"image_id": o, "image": _picture(k, rng)})
            sf_rows.append({"image_id": o, "wnid": wnid, "is_original": True, "num_shown": 10, "num_selected": 9, "selection_frequency": 0.9})
    duplicate, duplicate_of = per_class[WNIDS[1]][2], original_images[ORIGINALS_PER_CLASS + 4]["image_id"]
    next(r for r in images if r["candidate_id"] == duplicate)["image"] = original_images[ORIGINALS_PER_CLASS + 4]["image"]
    write_table(from_rows(candidates, "candidates"), pool / "candidates.parquet")
    write_table(from_rows(originals, "originals"), pool / "originals.parquet")
    write_table(from_rows(images, "images"), pool / "images.parquet")
    write_table(from_rows(sf_rows, "selection_frequencies"), pool / "selection_frequencies.parquet")
    originals_path = write_table(pa.Table.from_pylist(original_images), root / "originals-images.parquet")
    revision = root / "revisions" / "rev-0.json"
    revision.parent.mkdir()
    sample_stage(pool, revision, SamplingConfig(rule="top-images", seed=seed, per_class=PER_CLASS, wnids=tuple(WNIDS)))
    nd = root / "near-duplicates"
    nd.mkdir()
    write_table(_neighbours(per_class, duplicate, duplicate_of), nd / "neighbours.parquet")
    return ReviewWorld(root, pool, originals_path, revision, nd, per_class, duplicate, duplicate_of)


def _neighbours(per_class: dict, duplicate: str, duplicate_of: str) -> pa.Table:
    """Neighbours in the near-duplicate search's format: the planted pair close, others beyond the thresholds."""
    a, b = per_class[WNIDS[0]], per_class[WNIDS[1]]
    rows = []
    listing = {
        (duplicate, "l2"): [(duplicate_of, "validation", 2.1e7), (b[5], "candidates", 1.05e8), (b[7], "candidates", 1.6e8), (b[9], "candidates", 2.2e8)],
        (duplicate, "fc7"): [(duplicate_of, "validation", 2100.0), (b[5], "candidates", 15800.0), (b[1], "candidates", 17000.0)],
        (a[0], "l2"): [(a[3], "candidates", 9.6e7), (a[11], "candidates", 1.9e8), (b[0], "candidates", 2.5e8)],
        (a[0], "fc7"): [(a[3], "candidates", 12100.0), (a[4], "candidates", 14500.0)],
    }
    for (candidate, metric), neighbours in listing.items():
        for rank, (ref, source, distance) in enumerate(neighbours, start=1):
            rows.append({"candidate_id": candidate, "metric": metric, "rank": rank, "reference_id": ref, "reference_source": source, "distance": distance})
    return pa.Table.from_pylist(rows)

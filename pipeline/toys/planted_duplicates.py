"""Planted near-duplicates: the changes the benchmark measures, and the demo's near-duplicate step.

:func:`planted` makes a near-duplicate of an image by one of :data:`CHANGES` (JPEG quality 40,
resized by 10% and back, cropped by 5%, brightness +10%, rotated 3 degrees).
:func:`plant_in_toy_pool` replaces a few candidates of the toys' pool with copies of other
candidates and of originals of their class; :func:`demo_near_duplicates` searches those classes,
checks the planted pairs are found, and samples them with the review status.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHANGES = ("jpeg_q40", "resize_10", "crop_5", "brightness_10", "rotate_3")
# the toys' 16 x 16 images are alike within a class (nearest other image: l2 about 1.7e7, dssim
# about 0.19), so the demo plants milder copies (l2 about 5e6, dssim about 0.02) and reviews them at
DEMO_THRESHOLDS = {"l2": 1.0e7, "fc7": 1.32e4, "dssim": 0.05}
DEMO_CHANGES = ("resaved_q90", "brightness_3")


def planted(image: np.ndarray, change: str):
    """A Pillow image: the near-duplicate of ``image`` (uint8 HWC) made by ``change``.

    >>> import numpy as np
    >>> planted(np.zeros((40, 60, 3), np.uint8), "crop_5").size
    (58, 38)
    """
    from PIL import Image

    pil = Image.fromarray(image)
    w, h = pil.size
    if change == "resize_10":
        return pil.resize((int(w * 0.9), int(h * 0.9)), Image.BILINEAR).resize((w, h), Image.BILINEAR)
    if change == "crop_5":
        dx, dy = int(w * 0.025), int(h * 0.025)
        return pil.crop((dx, dy, w - dx, h - dy))
    if change == "brightness_10":
        return Image.fromarray(np.clip(image.astype(np.float32) * 1.1, 0, 255).astype(np.uint8))
    if change == "rotate_3":
        return pil.rotate(3, resample=Image.BILINEAR, fillcolor=tuple(int(v) for v in image.mean(axis=(0, 1))))
    if change == "jpeg_q40":
        return pil  # the change is in the saving: quality 40
    raise ValueError(f"unknown change {change!r}; the changes are {', '.join(CHANGES)}")


def planted_jpeg(data: bytes, change: str) -> bytes:
    """JPEG bytes of the near-duplicate of the JPEG ``data`` (also the demo's milder changes)."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    buffer = io.BytesIO()
    if change == "resaved_q90":
        Image.fromarray(image).save(buffer, format="JPEG", quality=90)
    elif change == "brightness_3":
        Image.fromarray(np.clip(image.astype(np.float32) * 1.03, 0, 255).astype(np.uint8)).save(buffer, format="JPEG", quality=90)
    else:
        planted(image, change).save(buffer, format="JPEG", quality=40 if change == "jpeg_q40" else 90)
    return buffer.getvalue()


@dataclass(frozen=True)
class PlantedPair:
    candidate_id: str  # the planted copy
    source_id: str  # what it copies: a candidate id or an original's file name
    source_is_original: bool
    wnid: str
    change: str


def plant_in_toy_pool(pool, candidate_images: list, original_images: list, seed: int, n_classes: int = 2) -> list[PlantedPair]:
    """In ``n_classes`` classes, replace one candidate by a copy of another and one by a copy of an original.

    ``candidate_images`` is changed in place (JPEG bytes in the pool's candidate order).
    """
    rng = np.random.default_rng([seed, 14])
    classes = rng.choice(len(pool.wnids), n_classes, replace=False)
    pairs = []
    for n, c in enumerate(sorted(classes)):
        members = np.flatnonzero(pool.candidate_class == c)
        originals = np.flatnonzero(pool.original_class == c)
        copy_a, source, copy_b = rng.choice(members, 3, replace=False)
        original = int(rng.choice(originals))
        change_a, change_b = DEMO_CHANGES if n % 2 == 0 else DEMO_CHANGES[::-1]
        candidate_images[copy_a] = planted_jpeg(candidate_images[source], change_a)
        candidate_images[copy_b] = planted_jpeg(original_images[original], change_b)
        wnid = str(pool.wnids[c])
        pairs.append(PlantedPair(str(pool.candidate_ids[copy_a]), str(pool.candidate_ids[source]), False, wnid, change_a))
        pairs.append(PlantedPair(str(pool.candidate_ids[copy_b]), str(pool.original_ids[original]), True, wnid, change_b))
    return pairs


def _write_subset(path: Path, id_column: str, ids, wnids, images, keep) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({id_column: [str(ids[i]) for i in keep], "wnid": [str(wnids[i]) for i in keep], "image": [images[i] for i in keep]})
    pq.write_table(table, path)
    return path


def demo_near_duplicates(tmp: Path, pool, pairs: list, candidate_images: list, original_images: list, *, seed: int, echo) -> dict:
    """The demo's step: search the planted classes, check the pairs are found, sample with the review status."""
    from pipeline.rebuild.near_duplicates import SearchConfig, near_duplicate_search
    from pipeline.rebuild.revision import SamplingConfig
    from pipeline.rebuild.sample import sample_stage

    wnids = sorted({p.wnid for p in pairs})
    folder = tmp / "inputs"
    cand_wnids = pool.wnids[pool.candidate_class]
    orig_wnids = pool.wnids[pool.original_class]
    candidates = _write_subset(folder / "near-duplicate-candidates.parquet", "candidate_id", pool.candidate_ids, cand_wnids,
                               candidate_images, np.flatnonzero(np.isin(cand_wnids, wnids)))
    originals = _write_subset(folder / "near-duplicate-originals.parquet", "image_id", pool.original_ids, orig_wnids,
                              original_images, np.flatnonzero(np.isin(orig_wnids, wnids)))
    metrics = ("l2", "fc7", "dssim") if _gpu() else ("l2", "dssim")
    config = SearchConfig(metrics=metrics, top_k=5, thresholds=DEMO_THRESHOLDS, similar_classes=-1, pretrained=False, workers=2)
    result = near_duplicate_search(str(candidates), [str(originals)], tmp / "near-duplicates", config)
    found = _found_at_rank_1(result.neighbours, pairs, str(candidates), str(originals))
    echo(f"      {len(result.neighbours):,} neighbours of {result.report['candidates']['searched']} candidates in "
         f"{', '.join(wnids)} against themselves and {result.report['references'][0]['images']} originals"
         + ("" if "fc7" in metrics else " (fc7 skipped: VGG-16 on a CPU costs seconds per image; it runs where there is a GPU)"))
    for metric in metrics:
        echo(f"      planted near-duplicates found at rank 1 by {metric}: {found[metric]} of {len(pairs)}")
    config = SamplingConfig(rule="top-images", seed=seed, per_class=3, wnids=tuple(wnids),
                            near_duplicate_review_targets={m: DEMO_THRESHOLDS[m] for m in ("l2", "fc7", "dssim")})
    sampled = sample_stage(tmp / "pool", tmp / "revisions-near-duplicates" / "top-images-ndr.json", config,
                           near_duplicate_review=tmp / "near-duplicates" / "review_status.parquet")
    decision = dict(zip(sampled.decisions.column("candidate_id").to_pylist(), sampled.decisions.column("decision").to_pylist()))
    excluded = sum(decision.get(p.candidate_id) == "review_unfinished" for p in pairs)
    waiting = sampled.report["exclusions"].get("review_unfinished", 0)
    echo(f"      sample (top-images on those classes, with review_status.parquet): {excluded} of {len(pairs)} planted "
         f"excluded as review_unfinished ({waiting} candidates in all await review: the copies and the candidates they copy)")
    return {"planted": len(pairs), "found_at_rank_1": found, "excluded_review_unfinished": excluded}


def _found_at_rank_1(neighbours, pairs, candidates: str, originals: str) -> dict:
    first = {}
    for row in neighbours.to_pylist():
        if row["rank"] == 1:
            first[(row["metric"], row["candidate_id"])] = (row["reference_id"], row["reference_source"])
    out = {}
    for metric in sorted({m for m, _ in first}):
        out[metric] = sum(first.get((metric, p.candidate_id)) == (p.source_id, originals if p.source_is_original else candidates) for p in pairs)
    return out


def _gpu() -> bool:
    if not Path("/dev/nvidiactl").exists():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())

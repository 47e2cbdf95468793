"""The DSSIM neighbours: exact top-k over a per-candidate set of references, as the paper restricted it.

DSSIM is far more expensive than the two Euclidean measures, so (as the original pipeline did)
each candidate is compared only with

- the references and candidates of its own class and of its class's ``similar`` most similar
  classes (:meth:`pipeline.rebuild.classes.ClassList.most_similar`), and
- the top neighbours it got under the other measures (``extra``: global reference indices).

``similar=-1`` leaves the class-based set out (only the other measures' neighbours).

Candidates of one class share the class-based set, whose per-image SSIM parts are computed once
per chunk of references. Images come back from the pixel store (the 256 x 256 copies).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .features import COPY_SIZE, Segment, read_rows
from .ssim import WINDOW, ssim_against, ssim_stats

CHUNK = 32
MEMBERS = 16


def _images(segments: Sequence[Segment], indices: np.ndarray) -> np.ndarray:
    rows = read_rows(segments, indices)
    return rows.reshape(len(indices), COPY_SIZE, COPY_SIZE, 3)


def class_sets(candidate_wnids: Sequence, reference_wnids: Sequence, classes, similar: int) -> dict:
    """class id → global reference indices of that class and its ``similar`` most similar classes."""
    reference_wnids = np.asarray([w if w is not None else "" for w in reference_wnids], dtype=object)
    out: dict = {}
    if similar < 0:  # no class-based set: only the top neighbours of the other measures
        return out
    for wnid in {w for w in candidate_wnids if w}:
        allowed = {wnid}
        if classes is not None and wnid in classes and similar > 0:
            allowed.update(classes.most_similar(wnid)[:similar])
        out[wnid] = np.flatnonzero(np.isin(reference_wnids, list(allowed)))
    return out


def _top(distances: list, indices: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    D = np.concatenate(distances) if distances else np.zeros(0)
    I = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    order = np.lexsort((I, D))[:k]
    out_d, out_i = np.full(k, np.inf), np.full(k, -1, np.int64)
    out_d[: len(order)], out_i[: len(order)] = D[order], I[order]
    return out_d, out_i


def dssim_top_k(
    candidates: Sequence[Segment],
    candidate_wnids: Sequence,
    references: Sequence[Segment],
    reference_wnids: Sequence,
    k: int,
    *,
    extra: list | None = None,
    exclude: np.ndarray | None = None,
    classes=None,
    similar: int = 5,
    window: int = WINDOW,
    progress=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dssim, global reference index, pairs compared)`` per candidate, the ``k`` smallest first."""
    n = len(candidate_wnids)
    D, I = np.full((n, k), np.inf), np.full((n, k), -1, np.int64)
    compared = np.zeros(n, np.int64)
    sets = class_sets(candidate_wnids, reference_wnids, classes, similar)
    groups: dict = {}
    for c, w in enumerate(candidate_wnids):
        groups.setdefault(w or None, []).append(c)
    bar = progress(total=n, desc="dssim", unit="cand") if progress else None
    for wnid, members in groups.items():
        shared = sets.get(wnid, np.zeros(0, np.int64)) if wnid else np.zeros(0, np.int64)
        for start in range(0, len(members), MEMBERS):
            batch = np.asarray(members[start : start + MEMBERS])
            found = _dssim_batch(candidates, references, batch, shared, extra, exclude, window)
            for c, (distances, indices) in zip(batch, found):
                compared[c] = sum(len(x) for x in indices)
                D[c], I[c] = _top(distances, indices, k)
            if bar is not None:
                bar.update(len(batch))
    if bar is not None:
        bar.close()
    return D, I, compared


def _dssim_batch(candidates, references, batch, shared, extra, exclude, window) -> list:
    stats = ssim_stats(_images(candidates, batch), window)
    found = [([], []) for _ in batch]
    for start in range(0, len(shared), CHUNK):
        chunk = shared[start : start + CHUNK]
        ref_stats = ssim_stats(_images(references, chunk), window)
        for m, c in enumerate(batch):
            keep = chunk != (exclude[c] if exclude is not None else -1)
            found[m][0].append(((1.0 - ssim_against(stats, m, ref_stats)) / 2.0)[keep])
            found[m][1].append(chunk[keep])
    shared_set = set(shared.tolist())
    for m, c in enumerate(batch):
        own = exclude[c] if exclude is not None else -1
        more = sorted({int(i) for i in (extra[c] if extra is not None else ()) if i >= 0 and i != own and int(i) not in shared_set})
        for at in range(0, len(more), CHUNK):
            chunk = np.asarray(more[at : at + CHUNK], np.int64)
            ref_stats = ssim_stats(_images(references, chunk), window)
            found[m][0].append((1.0 - ssim_against(stats, m, ref_stats)) / 2.0)
            found[m][1].append(chunk)
    return found

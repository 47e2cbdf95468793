"""Near-duplicate exclusion: from confirmed near-duplicate pairs to one flag per candidate.

Input (an input of ``sample``, decided by people looking at nearest neighbours): a table of
confirmed pairs ``image_id`` (a candidate) – ``duplicate_id`` (a candidate, or an original
ImageNet validation, test or train file such as ``ILSVRC2012_val_00000001.JPEG``,
``ILSVRC2012_test_00011250.JPEG`` or ``n01440764_10026.JPEG``), and
optionally a list of override candidates. Candidates that share a search-engine photo id are
linked too. The rule of the original pipeline on the graph of these links:

- a connected component touching any original ImageNet image: all its candidates are
  near-duplicates;
- otherwise one candidate per component is kept: the override member if there is one;
  else, among the component's classes whose best (non-blacklisted) selection frequency is at
  least 0.7 (failing that 0.6, failing that the single best class), the class with the fewest
  good candidates (≥ 0.7) in the whole pool, and in it the candidate with the highest selection
  frequency (ties: larger id). All other candidates of the component are near-duplicates.

A second input, the review table, says how far each candidate's neighbours were reviewed per
distance (``l2``, ``fc7``, ``dssim``); a candidate whose review reaches no further than the
revision's ``near_duplicate_review_targets`` on some distance is ``review_unfinished``.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa

IMAGENET_FILE = re.compile(r"(ILSVRC2012_(?:val|test)_\d{8}|n\d{8}_\d+)\.JPEG")  # validation, test or train file
GOOD_SELECTION_FREQUENCY = 0.7
REVIEW_METRICS = ("l2", "fc7", "dssim")
RELEASED_REVIEW_TARGETS = {"l2": 120000000.0, "dssim": 0.2205, "fc7": 13200.0}


def resolve_near_duplicates(
    candidate_ids: Sequence[str],
    wnids: Sequence[str],
    selection_frequency: np.ndarray,
    num_annotations: np.ndarray,
    blacklisted: np.ndarray,
    pairs: Optional[pa.Table],
    *,
    search_engine_ids: Optional[Sequence[Optional[str]]] = None,
    overrides: Sequence[str] = (),
) -> np.ndarray:
    """A bool per candidate: is it a near-duplicate to exclude?

    >>> ids = ["a" * 40, "b" * 40, "c" * 40, "d" * 40]
    >>> pairs = pa.table({"image_id": ["a" * 40, "c" * 40], "duplicate_id": ["b" * 40, "ILSVRC2012_val_00000001.JPEG"]})
    >>> resolve_near_duplicates(ids, ["n01440764"] * 4, np.array([.9, .8, .9, .9]), np.full(4, 10),
    ...                         np.zeros(4, bool), pairs).tolist()
    [False, True, True, False]
    """
    candidate_ids = list(candidate_ids)
    n = len(candidate_ids)
    index = {cid: i for i, cid in enumerate(candidate_ids)}
    unknown_overrides = [o for o in overrides if o not in index]
    if unknown_overrides:
        raise ValueError(f"near-duplicate override(s) name no candidate of the pool: {', '.join(unknown_overrides[:5])}")
    left, right, externals = _pair_links(pairs, index)
    same_photo_left, same_photo_right = _same_photo_links(search_engine_ids)
    left, right = left + same_photo_left, right + same_photo_right
    is_duplicate = np.zeros(n, bool)
    if not left:
        return is_duplicate
    linked, touches_imagenet, cand_component = _components(left, right, n, n + externals)
    is_duplicate[linked & touches_imagenet] = True
    sf = np.asarray(selection_frequency, float)
    good = (~np.asarray(blacklisted, bool)) & (np.asarray(num_annotations) > 0) & (sf >= GOOD_SELECTION_FREQUENCY)
    good_per_wnid: dict[str, int] = {}
    for w, g in zip(wnids, good):
        good_per_wnid[w] = good_per_wnid.get(w, 0) + int(g)
    free = np.flatnonzero(linked & ~touches_imagenet)
    for members in _split_by(free, cand_component[free]):
        keep = _component_keeper(members, candidate_ids, wnids, sf, num_annotations, blacklisted, set(overrides), good_per_wnid)
        is_duplicate[members] = True
        is_duplicate[keep] = False
    return is_duplicate


def _pair_links(pairs: Optional[pa.Table], index: Mapping[str, int]) -> tuple[list, list, int]:
    """Edges from the confirmed pairs; ImageNet files become extra nodes after the candidates."""
    n = len(index)
    externals: dict[str, int] = {}
    left, right = [], []
    if pairs is None:
        return left, right, 0
    for row, (a, b) in enumerate(zip(pairs.column("image_id").to_pylist(), pairs.column("duplicate_id").to_pylist()), start=1):
        if a not in index:
            raise ValueError(f"near-duplicates row {row}: image_id {a!r} is not a candidate of the pool")
        if b in index:
            j = index[b]
        elif isinstance(b, str) and IMAGENET_FILE.fullmatch(b):
            j = externals.setdefault(b, n + len(externals))
        else:
            raise ValueError(
                f"near-duplicates row {row}: duplicate_id {b!r} is neither a candidate of the pool nor an "
                f"ImageNet file name (ILSVRC2012_val_00000001.JPEG, ILSVRC2012_test_00011250.JPEG, n01440764_10026.JPEG)"
            )
        left.append(index[a])
        right.append(j)
    return left, right, len(externals)


def _same_photo_links(search_engine_ids: Optional[Sequence[Optional[str]]]) -> tuple[list, list]:
    """Edges between candidates that are the same search-engine photo."""
    left, right = [], []
    first: dict[str, int] = {}
    for i, sid in enumerate(search_engine_ids or ()):
        if sid is None:
            continue
        if sid in first:
            left.append(first[sid])
            right.append(i)
        else:
            first[sid] = i
    return left, right


def _components(left: list, right: list, n: int, size: int):
    """Per candidate: linked at all, its component touches an ImageNet file, and its component id."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(left)), (left, right)), shape=(size, size))
    _, component = connected_components(graph, directed=False)
    linked = np.zeros(size, bool)
    linked[left] = linked[right] = True
    touches_imagenet = np.zeros(component.max() + 1, bool)
    touches_imagenet[component[n:]] = True
    return linked[:n], touches_imagenet[component[:n]], component[:n]


def _split_by(items: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(labels, kind="stable")
    items, labels = items[order], labels[order]
    cuts = np.flatnonzero(np.diff(labels)) + 1
    return [part for part in np.split(items, cuts) if len(part)]


def _component_keeper(members, ids, wnids, sf, num_annotations, blacklisted, overrides, good_per_wnid) -> int:
    chosen = [m for m in members if ids[m] in overrides]
    if len(chosen) > 1:
        raise ValueError(f"near-duplicate overrides {', '.join(ids[m] for m in chosen)} are in one component; keep at most one")
    if chosen:
        return int(chosen[0])
    score = {m: (0.0 if blacklisted[m] or num_annotations[m] == 0 else float(sf[m])) for m in members}
    best_by_wnid: dict[str, float] = {}
    for m in members:
        best_by_wnid[wnids[m]] = max(best_by_wnid.get(wnids[m], 0.0), score[m])
    classes = [w for w, s in best_by_wnid.items() if s >= GOOD_SELECTION_FREQUENCY]
    classes = classes or [w for w, s in best_by_wnid.items() if s >= GOOD_SELECTION_FREQUENCY - 0.1]
    classes = classes or [max(best_by_wnid.items(), key=lambda item: (item[1], item[0]))[0]]
    smallest = min(classes, key=lambda w: (good_per_wnid.get(w, 0), w))
    return int(max((m for m in members if wnids[m] == smallest), key=lambda m: (score[m], ids[m])))


def review_table_from_status(status: pa.Table) -> pa.Table:
    """The review table from ``near-duplicates``' ``review_status.parquet`` (one row per candidate and measure).

    Each measure's column is the distance up to which the candidate's neighbours were reviewed
    (``reviewed_up_to``). A measure the search did not run at all is ``inf`` for every candidate:
    it was not checked, which the caller should say.

    >>> status = pa.table({"candidate_id": ["a", "a"], "metric": ["l2", "dssim"], "reviewed_up_to": [2e8, 0.1]})
    >>> review_table_from_status(status).to_pylist()
    [{'candidate_id': 'a', 'l2': 200000000.0, 'fc7': inf, 'dssim': 0.1}]
    """
    ids = status.column("candidate_id").to_pylist()
    metrics = status.column("metric").to_pylist()
    up_to = status.column("reviewed_up_to").to_pylist()
    unknown = sorted(set(metrics) - set(REVIEW_METRICS))
    if unknown:
        raise ValueError(f"review status names unknown measure(s) {', '.join(unknown)}; the measures are {', '.join(REVIEW_METRICS)}")
    order = list(dict.fromkeys(ids))
    columns = {m: dict.fromkeys(order, float("inf") if m not in metrics else None) for m in REVIEW_METRICS}
    for cid, metric, value in zip(ids, metrics, up_to):
        columns[metric][cid] = value
    for metric in set(metrics):
        lacking = [c for c, v in columns[metric].items() if v is None]
        if lacking:
            raise ValueError(f"review status has no {metric} row for candidate {lacking[0]} (and {len(lacking) - 1} more); re-run near-duplicates")
    return pa.table({"candidate_id": pa.array(order, pa.string()), **{m: pa.array(list(columns[m].values()), pa.float64()) for m in REVIEW_METRICS}})


def review_finished(
    candidate_ids: Sequence[str],
    review: Optional[pa.Table],
    targets: Mapping[str, float],
) -> Optional[np.ndarray]:
    """A bool per candidate: were its neighbours reviewed beyond ``targets`` on every distance?

    ``review`` is a ``near_duplicate_review`` table; ``None`` means no review table was given
    (no candidate is excluded for an unfinished review, and this returns ``None``).

    >>> review = pa.table({"candidate_id": ["a" * 40], "l2": [2e8], "fc7": [2e4], "dssim": [0.2]})
    >>> review_finished(["a" * 40, "b" * 40], review, RELEASED_REVIEW_TARGETS).tolist()  # dssim 0.2 ≤ 0.2205
    [False, False]
    """
    if review is None:
        return None
    missing = [m for m in REVIEW_METRICS if m not in targets]
    if missing:
        raise ValueError(f"near_duplicate_review_targets lacks {', '.join(missing)}; it needs l2, fc7 and dssim")
    ids = review.column("candidate_id").to_pylist()
    if len(set(ids)) != len(ids):
        raise ValueError("near-duplicate review table lists a candidate twice; one row per candidate")
    position = {cid: i for i, cid in enumerate(ids)}
    done = np.ones(len(ids), bool)
    for metric in REVIEW_METRICS:
        done &= review.column(metric).to_numpy(zero_copy_only=False) > targets[metric]
    finished = np.zeros(len(candidate_ids), bool)
    for i, cid in enumerate(candidate_ids):
        j = position.get(cid)
        finished[i] = j is not None and done[j]
    return finished

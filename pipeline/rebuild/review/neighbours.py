"""The near-duplicate page's data: each candidate's nearest neighbours per measure, and its review status.

Input: ``DIR/neighbours.parquet`` written by ``python -m pipeline near-duplicates`` (columns
``candidate_id``, ``metric``, ``rank``, ``reference_id``, ``reference_source``, ``distance``).
A candidate is *sufficiently reviewed* for a measure, as in the original pipeline, when every
neighbour closer than that measure's review threshold (the revision's
``near_duplicate_review_targets``) has been reviewed, i.e. its nearest unreviewed neighbour is
farther than the threshold. The page lists the candidates that have at least one neighbour
under a threshold, the revision's images first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

NEIGHBOUR_COLUMNS = ("candidate_id", "metric", "rank", "reference_id", "reference_source", "distance")
NEIGHBOURS_FILE = "neighbours.parquet"


@dataclass(frozen=True)
class Neighbour:
    metric: str
    rank: int
    reference_id: str
    reference_source: str
    distance: float


class Neighbours:
    """Candidate id → its neighbours, grouped by measure and sorted by distance."""

    def __init__(self, by_candidate: Mapping[str, Mapping[str, Sequence[Neighbour]]], thresholds: Mapping[str, float], first: Sequence[str] = ()):
        self.by_candidate = {c: {m: sorted(n, key=lambda x: (x.distance, x.rank)) for m, n in per.items()} for c, per in by_candidate.items()}
        self.thresholds = dict(thresholds)
        priority = {cid: i for i, cid in enumerate(first)}
        needing = [c for c in self.by_candidate if self.below_threshold(c)]
        self.order = sorted(needing, key=lambda c: (priority.get(c, len(priority)), c))

    def metrics(self, candidate_id: str) -> list[str]:
        return sorted(self.by_candidate.get(candidate_id, {}))

    def below_threshold(self, candidate_id: str) -> list[Neighbour]:
        """The neighbours a person must look at: closer than their measure's threshold."""
        out = []
        for metric, neighbours in self.by_candidate.get(candidate_id, {}).items():
            threshold = self.thresholds.get(metric)
            out.extend(n for n in neighbours if threshold is not None and n.distance <= threshold)
        return out

    def neighbour(self, candidate_id: str, reference_id: str, metric: str) -> Optional[Neighbour]:
        """The listed neighbour ``reference_id`` of ``candidate_id`` on ``metric`` (any metric when ``metric`` lists it not)."""
        per_metric = self.by_candidate.get(candidate_id, {})
        for m in [metric, *sorted(per_metric)]:
            for n in per_metric.get(m, ()):
                if n.reference_id == reference_id:
                    return n
        return None

    def status(self, candidate_id: str, reviewed: set) -> dict:
        """Per measure: sufficiently reviewed?, and how many neighbours under the threshold are still unreviewed.

        ``reviewed`` holds the references of the candidate's reviewed pairs; a reviewed pair
        counts for every measure.
        """
        status = {}
        for metric in self.metrics(candidate_id):
            pending = [n for n in self.below_threshold(candidate_id) if n.metric == metric and n.reference_id not in reviewed]
            status[metric] = {"sufficient": not pending, "unreviewed_below_threshold": len(pending)}
        return status


def load_neighbours(folder: Path, thresholds: Mapping[str, float], known: set, first: Sequence[str] = ()) -> Neighbours:
    """Read ``folder/neighbours.parquet``; a clear error when it is missing, malformed, or names unknown candidates."""
    import pyarrow.parquet as pq

    path = Path(folder) / NEIGHBOURS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the --output folder of `python -m pipeline near-duplicates` as --near-duplicates")
    table = pq.read_table(path)
    missing = [c for c in NEIGHBOUR_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; a neighbours table has {', '.join(NEIGHBOUR_COLUMNS)}")
    columns = table.select(list(NEIGHBOUR_COLUMNS)).to_pydict()
    by_candidate: dict[str, dict[str, list[Neighbour]]] = {}
    unknown: Optional[str] = None
    for cid, metric, rank, ref, source, distance in zip(*(columns[c] for c in NEIGHBOUR_COLUMNS)):
        if cid not in known:
            unknown = unknown or cid
            continue
        if ref == cid:
            continue
        by_candidate.setdefault(cid, {}).setdefault(metric, []).append(Neighbour(metric, int(rank), ref, source or "", float(distance)))
    if unknown is not None:
        raise ValueError(f"{path} lists candidate {unknown}, which is not in the pool; run `near-duplicates` on this pool")
    return Neighbours(by_candidate, thresholds, first)

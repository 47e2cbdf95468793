"""Each image's Tiny Images index and keyword, derived from the release's metadata files.

The files (package data in ``cifar10_1/data/``, copies of the CIFAR-10.1 repository's):

- ``cifar10.1_<v>_ti_indices.json``: the Tiny Images index of every image, in array order.
- v4: ``cifar10.1_v4_ti_indices_per_keyword.json`` maps keyword → indices; concatenating the
  lists in key order gives the v4 array order exactly.
- v6: ``tinyimage_good_indices_subselected_v6.json`` maps keyword → the labelled pool it was
  sampled from, ``keyword_counts_v6.json`` class → {keyword: images in v6}. A keyword of two
  classes (``cruiser``: automobile and ship) is split by ``cruiser_good_indices.json``.

Every image gets exactly one keyword, or the derivation fails and says which images are left.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from functools import lru_cache
from importlib import resources
from typing import Callable, Mapping, NamedTuple, Sequence

from .variants import CLASS_NAMES

# keyword shared by two classes -> the file listing, per class, the pool images of that class
SEPARATION_FILES = {"cruiser": "cruiser_good_indices.json"}


@lru_cache(maxsize=None)
def _metadata(filename: str):
    return json.loads(resources.files("cifar10_1").joinpath("data", filename).read_text("utf-8"))


def ti_indices(version: str) -> list[int]:
    """The Tiny Images index of every image of ``version`` (``"v4"``, ``"v6"``), in array order.

    >>> len(ti_indices("v4")), ti_indices("v4")[0]
    (2021, 40346471)
    """
    return list(_metadata(f"cifar10.1_{version}_ti_indices.json"))


class V6Metadata(NamedTuple):
    """The files the v6 keywords come from."""

    pool: Mapping[str, Sequence[int]]  # keyword -> labelled Tiny Images indices
    keyword_counts: Mapping[str, Mapping[str, int]]  # class -> {keyword: images in v6}
    separations: Mapping[str, Mapping[str, Sequence[int]]]  # shared keyword -> class -> indices

    @classmethod
    def released(cls) -> "V6Metadata":
        return cls(
            _metadata("tinyimage_good_indices_subselected_v6.json"),
            _metadata("keyword_counts_v6.json"),
            {keyword: _metadata(f) for keyword, f in SEPARATION_FILES.items()},
        )


def keyword_counts(keywords: Sequence[str], labels: Sequence[int]) -> dict[str, dict[str, int]]:
    """Class name → {keyword: images}, the shape of ``keyword_counts_v6.json``.

    >>> keyword_counts(["cruiser", "cruiser", "airbus"], [1, 8, 0])
    {'automobile': {'cruiser': 1}, 'ship': {'cruiser': 1}, 'airplane': {'airbus': 1}}
    """
    counts: dict[str, dict[str, int]] = {}
    for keyword, label in zip(keywords, labels):
        per_class = counts.setdefault(CLASS_NAMES[int(label)], {})
        per_class[keyword] = per_class.get(keyword, 0) + 1
    return counts


def v4_keywords(indices: Sequence[int], labels: Sequence[int]) -> list[str]:
    """Keywords of the v4 images: the per-keyword lists, concatenated in key order, are the v4 order.

    >>> v4_keywords(ti_indices("v4"), [6] * 2021)[:2]
    ['leopard_frog', 'leopard_frog']
    """
    per_keyword = _metadata("cifar10.1_v4_ti_indices_per_keyword.json")
    ordered = [(keyword, i) for keyword, lst in per_keyword.items() for i in lst]
    if [i for _, i in ordered] != list(indices):
        raise ValueError(
            "the v4 per-keyword index lists, concatenated in key order, do not reproduce the v4 Tiny "
            "Images indices; cifar10_1/data/ is not the released metadata (reinstall the package)."
        )
    return [keyword for keyword, _ in ordered]


def v6_keywords(indices: Sequence[int], labels: Sequence[int], metadata: V6Metadata | None = None) -> list[str]:
    """Keywords of the v6 images, resolved with each image's class and the per-class keyword counts.

    An index found under several keywords keeps those of its class (and, for a shared keyword such
    as ``cruiser``, only if the separation file lists it for that class); if still several remain,
    keywords whose count is already used up are dropped. The per-class counts of the result must
    equal ``keyword_counts_v6.json`` exactly.

    >>> meta = V6Metadata({"airbus": [5, 7], "jet": [7]}, {"airplane": {"airbus": 1, "jet": 1}}, {})
    >>> v6_keywords([5, 7], [0, 0], meta)
    ['airbus', 'jet']
    """
    meta = metadata or V6Metadata.released()
    shared = _shared_keywords(meta.keyword_counts)
    unseparated = sorted(set(shared) - set(meta.separations))
    if unseparated:
        raise ValueError(f"keywords {unseparated} belong to several classes and no file separates them")
    under = defaultdict(list)
    for keyword, pool in meta.pool.items():
        for index in pool:
            under[index].append(keyword)
    separated = {(k, name): set(lst) for k, per_class in meta.separations.items() for name, lst in per_class.items()}
    candidates = []
    for index, label in zip(indices, labels):
        name = CLASS_NAMES[int(label)]
        of_class = meta.keyword_counts.get(name, {})
        candidates.append(
            [k for k in under.get(index, []) if k in of_class and (k not in shared or index in separated.get((k, name), ()))]
        )
    keywords = _resolve_by_counts(candidates, labels, meta.keyword_counts)
    _check_complete(keywords, candidates, indices, labels)
    derived = keyword_counts(keywords, labels)
    expected = {c: dict(d) for c, d in meta.keyword_counts.items() if d}
    if derived != expected:
        raise ValueError(f"derived v6 keyword counts differ from keyword_counts_v6.json: {_diff(derived, expected)}")
    return keywords


def _shared_keywords(counts: Mapping[str, Mapping[str, int]]) -> set[str]:
    seen = Counter(k for per_class in counts.values() for k in per_class)
    return {k for k, n in seen.items() if n > 1}


def _resolve_by_counts(candidates, labels, counts) -> list:
    """Assign unique candidates; then drop candidates whose keyword count is used up, until stable."""
    chosen = [c[0] if len(c) == 1 else None for c in candidates]
    while True:
        used = Counter((CLASS_NAMES[int(l)], k) for k, l in zip(chosen, labels) if k is not None)
        progress = False
        for i, options in enumerate(candidates):
            if chosen[i] is not None or len(options) < 2:
                continue
            name = CLASS_NAMES[int(labels[i])]
            left = [k for k in options if used[(name, k)] < counts[name][k]]
            if len(left) == 1:
                chosen[i], progress = left[0], True
                used[(name, left[0])] += 1
        if not progress:
            return chosen


def _check_complete(keywords, candidates, indices, labels) -> None:
    missing = [i for i, (k, c) in enumerate(zip(keywords, candidates)) if k is None and not c]
    ambiguous = [i for i, (k, c) in enumerate(zip(keywords, candidates)) if k is None and c]
    problems = []
    if missing:
        shown = ", ".join(f"#{i} (Tiny Images {indices[i]}, {CLASS_NAMES[int(labels[i])]})" for i in missing[:5])
        problems.append(f"{len(missing)} image(s) have no keyword of their class: {shown}")
    if ambiguous:
        shown = ", ".join(f"#{i} (Tiny Images {indices[i]}: {candidates[i]})" for i in ambiguous[:5])
        problems.append(f"{len(ambiguous)} image(s) have several possible keywords: {shown}")
    if problems:
        raise ValueError(
            "cannot give every image one Tiny Images keyword: "
            + "; ".join(problems)
            + ". The labels or the metadata are not the released ones."
        )


def _diff(derived, expected) -> str:
    lines = []
    for name in CLASS_NAMES:
        a, b = derived.get(name, {}), expected.get(name, {})
        for k in sorted(set(a) | set(b)):
            if a.get(k, 0) != b.get(k, 0):
                lines.append(f"{name}/{k}: derived {a.get(k, 0)}, expected {b.get(k, 0)}")
    return "; ".join(lines[:10]) + (f" (and {len(lines) - 10} more)" if len(lines) > 10 else "")


# version -> how its keywords are derived from (Tiny Images indices, labels)
KEYWORD_DERIVATIONS: Mapping[str, Callable[[Sequence[int], Sequence[int]], list]] = {
    "v4": v4_keywords,
    "v6": v6_keywords,
}


def image_keywords(version: str, indices: Sequence[int], labels: Sequence[int]) -> list[str]:
    """The Tiny Images keyword of every image of ``version``, in array order."""
    return KEYWORD_DERIVATIONS[version](indices, labels)

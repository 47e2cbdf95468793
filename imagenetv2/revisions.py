"""Revision lists: which candidate ids a set holds, and in which class.

A revision file (``imagenetv2-b-33.json`` and its siblings) records how a set was sampled and
lists its images as ``image_filenames`` = ``[[candidate id, wnid], ...]``. The archives hold
exactly these images, each in the folder of its wnid's class index.
"""

from __future__ import annotations

import json
import os
from collections import Counter  # noqa: F401 (used by the doctests)
from importlib import resources
from typing import Mapping, Union

from .classes import wnid_to_index

RevisionSource = Union[str, "os.PathLike[str]", Mapping]


def released_revision_json(name: str) -> dict:
    """The released revision file called ``name`` (e.g. ``"imagenetv2-b-33"``), from package data.

    >>> released_revision_json("imagenetv2-c-12")["sampling_function"]
    'sample_best'
    """
    path = resources.files("imagenetv2").joinpath(f"data/{name}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no released revision {name!r} in the imagenetv2 package data")
    return json.loads(path.read_text("utf-8"))


def load_revision_json(source: RevisionSource) -> dict:
    """A revision as a dict, from a mapping, a file path, or a released revision's name."""
    if isinstance(source, Mapping):
        return dict(source)
    text = os.fspath(source)
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            return json.load(f)
    if "/" not in text and os.sep not in text and not text.endswith(".json"):
        return released_revision_json(text)
    raise FileNotFoundError(f"revision file {text} does not exist")


def expected_images(revision: Mapping) -> dict[str, int]:
    """Map candidate id → class index for every image the revision lists.

    Raises ``ValueError`` on an unknown wnid or a candidate id listed twice.

    >>> expected = expected_images(released_revision_json("imagenetv2-b-33"))
    >>> len(expected), sorted(Counter(expected.values()).values())[:1]
    (10000, [10])
    """
    if "image_filenames" not in revision:
        raise ValueError("not a revision: it has no 'image_filenames' list of [candidate id, wnid] pairs")
    index = wnid_to_index()
    expected: dict[str, int] = {}
    for i, pair in enumerate(revision["image_filenames"]):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise ValueError(f"image_filenames[{i}] is {pair!r}; expected a [candidate id, wnid] pair")
        candidate_id, wnid = pair
        if wnid not in index:
            raise ValueError(f"image_filenames[{i}]: unknown wnid {wnid!r} (not one of the 1000 ImageNet classes)")
        if candidate_id in expected:
            raise ValueError(f"image_filenames[{i}]: candidate id {candidate_id} is listed twice")
        expected[candidate_id] = index[wnid]
    return expected


def revision_name(revision: Mapping, fallback: str = "custom") -> str:
    """The revision's name, from its ``output_filename`` (``imagenetv2-b-33.json`` → ``imagenetv2-b-33``)."""
    name = revision.get("output_filename") or fallback
    return str(name).removesuffix(".json")

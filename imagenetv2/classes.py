"""The 1000 ImageNet classes in the standard order, with unique human-readable names.

The standard order is the sorted order of the WordNet ids; ImageNetV2's class folders ``0`` …
``999`` are indices into it (``ImageFolder``'s string sort of the folder names is the classic
mislabelling trap). Names are each synset's first lemma, except where two classes share one.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

# First lemmas shared by two classes (case-insensitively), told apart here. The card says so.
DISAMBIGUATED_NAMES = {
    "n02012849": "crane (bird)",
    "n03126707": "crane (machine)",
    "n03710637": "maillot (tights)",
    "n03710721": "maillot (bathing suit)",
    "n02113186": "Cardigan Welsh corgi",
}


class ImageNetClass(NamedTuple):
    index: int  # position in the standard order = the archive's folder name
    wnid: str
    name: str  # unique human-readable name (the ClassLabel name)
    synset: tuple[str, ...]  # all WordNet lemmas
    gloss: str


@lru_cache(maxsize=None)
def imagenet_classes() -> tuple[ImageNetClass, ...]:
    """All 1000 classes in the standard order (from the package's ``class_info.json``).

    >>> classes = imagenet_classes()
    >>> classes[0].wnid, classes[0].name, classes[999].name
    ('n01440764', 'tench', 'toilet tissue')
    >>> [c.name for c in classes if c.synset[0] == "crane"]
    ['crane (bird)', 'crane (machine)']
    """
    raw = json.loads(resources.files("imagenetv2").joinpath("data/class_info.json").read_text("utf-8"))
    classes = tuple(
        ImageNetClass(c["cid"], c["wnid"], DISAMBIGUATED_NAMES.get(c["wnid"], c["synset"][0]), tuple(c["synset"]), c["gloss"])
        for c in raw
    )
    wnids = [c.wnid for c in classes]
    if [c.index for c in classes] != list(range(1000)) or wnids != sorted(wnids):
        raise RuntimeError("class_info.json is not the 1000 ImageNet classes in sorted wnid order")
    lowered = [c.name.lower() for c in classes]
    if len(set(lowered)) != len(lowered):
        raise RuntimeError("ImageNet class names are not unique; extend DISAMBIGUATED_NAMES")
    return classes


def wnids() -> list[str]:
    """The 1000 WordNet ids in the standard order."""
    return [c.wnid for c in imagenet_classes()]


def class_names() -> list[str]:
    """The 1000 unique class names in the standard order (the ``label`` ClassLabel names)."""
    return [c.name for c in imagenet_classes()]


@lru_cache(maxsize=None)
def wnid_to_index() -> dict[str, int]:
    return {c.wnid: c.index for c in imagenet_classes()}

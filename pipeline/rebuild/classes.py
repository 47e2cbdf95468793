"""The class list of a rebuild: which classes, their readable names, query lemmas and similar classes.

The index of a class is its position in the sorted ids, as in ImageNet. The default is
ImageNet-1k (:func:`imagenet_1k`); :func:`load_classes` reads a class list file.

>>> classes = load_classes()
>>> len(classes), classes.wnids[0], classes.name("n01440764"), classes.index("n01443537")
(1000, 'n01440764', 'tench', 1)
>>> classes.most_similar("n01440764")[0]
'n01443537'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Mapping, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ClassInfo:
    """One class: its id, a unique readable name, its query lemmas, and optional WordNet facts."""

    wnid: str
    name: str
    lemmas: tuple[str, ...]
    gloss: str = ""
    parent: str = ""  # a readable word of the parent class (for expansion queries)
    most_similar: tuple[str, ...] = ()  # ids of the most similar classes, most similar first


@dataclass(frozen=True)
class ClassList:
    """Classes in the standard order (sorted ids)."""

    classes: tuple[ClassInfo, ...]
    source: str = "imagenet-1k"
    _index: Mapping[str, int] = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self):
        wnids = [c.wnid for c in self.classes]
        if wnids != sorted(wnids) or len(set(wnids)) != len(wnids):
            raise ValueError(f"class list {self.source}: class ids must be unique and sorted")
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(wnids)})

    def __len__(self) -> int:
        return len(self.classes)

    def __contains__(self, wnid: object) -> bool:
        return wnid in self._index

    @property
    def wnids(self) -> tuple[str, ...]:
        return tuple(c.wnid for c in self.classes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)

    def index(self, wnid: str) -> int:
        try:
            return self._index[wnid]
        except KeyError:
            raise ValueError(f"unknown class id {wnid!r}: not in the class list {self.source}") from None

    def info(self, wnid: str) -> ClassInfo:
        return self.classes[self.index(wnid)]

    def name(self, wnid: str) -> str:
        return self.info(wnid).name

    def most_similar(self, wnid: str) -> tuple[str, ...]:
        """The most similar other classes of the list, most similar first."""
        return tuple(w for w in self.info(wnid).most_similar if w != wnid and w in self)


@lru_cache(maxsize=None)
def imagenet_1k() -> ClassList:
    """ImageNet-1k from package data (names, lemmas, glosses; similar classes of the original)."""
    from imagenetv2.classes import imagenet_classes

    similar = json.loads(resources.files("pipeline").joinpath("data/wnid_to_most_similar_wnids.json").read_text("utf-8"))
    classes = tuple(
        ClassInfo(c.wnid, c.name, c.synset, c.gloss, "", tuple(similar.get(c.wnid, ())))
        for c in imagenet_classes()
    )
    return ClassList(classes, "imagenet-1k")


def load_classes(path: Optional[PathLike] = None, *, wordnet: Optional[PathLike] = None) -> ClassList:
    """The class list in ``path`` (JSON, YAML or a text file of ids), or ImageNet-1k when None."""
    if path is None:
        return imagenet_1k()
    raise NotImplementedError("class list files: see the candidate-search issue")


def class_list_of(wnids: Sequence[str]) -> ClassList:
    """A ClassList for ``wnids``: ImageNet's facts where the id is an ImageNet class, else the id as name."""
    base = imagenet_1k()
    classes = tuple(base.info(w) if w in base else ClassInfo(w, w, (w,)) for w in sorted(set(wnids)))
    return ClassList(classes, "given ids")

"""The class list of a rebuild: which classes, their readable names, query lemmas and similar classes.

The index of a class is its position in the sorted ids, as in ImageNet. The default is
ImageNet-1k (:func:`imagenet_1k`, package data: names, lemmas, glosses, each class's WordNet
parent word and its most similar classes); :func:`load_classes` reads a class list file:

- JSON or YAML: a list (or ``{"classes": [...]}``) of objects with ``wnid`` (or ``id``), and
  optionally ``name`` (unique; default the first lemma), ``lemmas``, ``gloss``, ``parent`` and
  ``most_similar``; a bare id string is an object with only its id;
- a plain text file: one id per line (``#`` starts a comment).

Facts a file leaves out come from ImageNet-1k for ImageNet's classes, and for other WordNet
synsets from a local WordNet 3.0 database (``wordnet=DIR``, :mod:`pipeline.rebuild.wordnet`).

>>> classes = load_classes()
>>> len(classes), classes.wnids[0], classes.name("n01440764"), classes.index("n01443537")
(1000, 'n01440764', 'tench', 1)
>>> classes.most_similar("n01440764")[0]
'n01443537'
>>> classes.info("n01440764").parent
'cyprinid'
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]

CLASS_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
WNID = re.compile(r"n\d{8}")
IMAGENET_1K_DATA = "data/imagenet_1k_classes.json"
FIELDS = ("wnid", "name", "lemmas", "gloss", "parent", "most_similar")


@dataclass(frozen=True)
class ClassInfo:
    """One class: its id, a unique readable name, its query lemmas, and optional WordNet facts."""

    wnid: str
    name: str
    lemmas: tuple[str, ...]
    gloss: str = ""
    parent: str = ""  # a readable word of the parent class (for expansion queries)
    most_similar: tuple[str, ...] = ()  # ids of the most similar classes, most similar first

    def record(self) -> dict:
        """The class as a JSON object of a class list file."""
        return {"wnid": self.wnid, "name": self.name, "lemmas": list(self.lemmas), "gloss": self.gloss,
                "parent": self.parent, "most_similar": list(self.most_similar)}


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

    @property
    def is_imagenet_1k(self) -> bool:
        """Whether these are exactly the 1,000 ImageNet classes (the ImageNetV2 builder's labels)."""
        return self.wnids == imagenet_1k().wnids

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

    def check_ids(self, wnids, where: str) -> None:
        """Raise ValueError naming the first ids of ``wnids`` that are not in the list."""
        unknown = sorted({w for w in wnids if w not in self._index})
        if unknown:
            raise ValueError(
                f"{where}: class id(s) {', '.join(map(repr, unknown[:5]))}{' ...' if len(unknown) > 5 else ''} "
                f"not in the class list {self.source} ({len(self)} classes); pass the right --classes FILE"
            )


@lru_cache(maxsize=None)
def imagenet_1k() -> ClassList:
    """ImageNet-1k from package data (names, lemmas, glosses, parent words; similar classes of the original)."""
    raw = json.loads(resources.files("pipeline.rebuild").joinpath(IMAGENET_1K_DATA).read_text("utf-8"))
    return ClassList(tuple(_info_from_record(r) for r in raw), "imagenet-1k")


def _info_from_record(record: Mapping) -> ClassInfo:
    return ClassInfo(record["wnid"], record["name"], tuple(record["lemmas"]), record.get("gloss", ""),
                     record.get("parent", ""), tuple(record.get("most_similar", ())))


def load_classes(path: Optional[PathLike] = None, *, wordnet: Optional[PathLike] = None) -> ClassList:
    """The class list in ``path`` (JSON, YAML or a text file of ids), or ImageNet-1k when None.

    ``wordnet`` is a WordNet 3.0 database folder that fills in lemmas, glosses, parents and
    similar classes of WordNet ids the file does not describe.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "classes.txt"
    >>> _ = path.write_text("n01443537  # goldfish\\nn01440764\\n")
    >>> classes = load_classes(path)
    >>> classes.wnids, classes.names, classes.most_similar("n01440764")
    (('n01440764', 'n01443537'), ('tench', 'goldfish'), ('n01443537',))
    """
    if path is None:
        return imagenet_1k()
    path = Path(path)
    entries = _read_entries(path)
    if not entries:
        raise ValueError(f"class list {path}: no classes; list one class id per line, or a JSON/YAML list of classes")
    return class_list_from_entries(entries, str(path), wordnet=wordnet)


def class_list_from_entries(entries: Sequence[Mapping], source: str, *, wordnet: Optional[PathLike] = None) -> ClassList:
    """A ClassList from partial class records, filling what they leave out (see :func:`load_classes`)."""
    records = [_normalise(entry, source, i) for i, entry in enumerate(entries)]
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        if record["wnid"] in seen:
            raise ValueError(f"class list {source}: class {record['wnid']!r} is listed twice (entries {seen[record['wnid']]} and {i})")
        seen[record["wnid"]] = i
    _fill(records, source, wordnet)
    _check_names(records, source)
    classes = tuple(_info_from_record(r) for r in sorted(records, key=lambda r: r["wnid"]))
    return ClassList(classes, source)


def _read_entries(path: Path) -> list:
    if not path.is_file():
        raise FileNotFoundError(f"class list {path} does not exist")
    text = path.read_text("utf-8")
    suffix = path.suffix.lower()
    if suffix in (".json", ".yaml", ".yml"):
        data = _parse_structured(text, path, suffix)
        if isinstance(data, dict) and "classes" in data:
            data = data["classes"]
        if not isinstance(data, list):
            raise ValueError(f"class list {path}: expected a list of classes (or an object with a 'classes' list), got {type(data).__name__}")
        return data
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def _parse_structured(text: str, path: Path, suffix: str):
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"class list {path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"class list {path}: not valid YAML ({e})") from None


def _normalise(entry, source: str, i: int) -> dict:
    if isinstance(entry, str):
        entry = {"wnid": entry}
    if not isinstance(entry, Mapping):
        raise ValueError(f"class list {source}, entry {i}: expected a class id or an object with 'wnid', got {entry!r}")
    entry = dict(entry)
    if "id" in entry and "wnid" not in entry:
        entry["wnid"] = entry.pop("id")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise ValueError(f"class list {source}, entry {i}: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
    wnid = entry.get("wnid")
    if not isinstance(wnid, str) or not CLASS_ID.fullmatch(wnid):
        raise ValueError(f"class list {source}, entry {i}: class id {wnid!r} is not an id like n01440764 (letters, digits, _ . -)")
    lemmas = entry.get("lemmas")
    if isinstance(lemmas, str):
        entry["lemmas"] = [lemmas]
    for key in ("lemmas", "most_similar"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) and v for v in value)):
            raise ValueError(f"class list {source}, class {wnid}: {key} must be a list of strings, got {value!r}")
    return entry


def _fill(records: list[dict], source: str, wordnet: Optional[PathLike]) -> None:
    base = imagenet_1k() if source != "imagenet-1k" else None
    missing = [r for r in records if not r.get("lemmas") and not (base and r["wnid"] in base)]
    lookup = {}
    if wordnet is not None and any(WNID.fullmatch(r["wnid"]) for r in records):
        from pipeline.rebuild.wordnet import WordNet

        lookup = WordNet(wordnet).describe([r["wnid"] for r in records if WNID.fullmatch(r["wnid"])])
    if missing and not lookup:
        ids = ", ".join(r["wnid"] for r in missing[:5])
        raise ValueError(
            f"class list {source}: no lemmas for {ids}{' ...' if len(missing) > 5 else ''}; give each class its "
            f"'lemmas' in a JSON/YAML class list, or pass --wordnet DIR (a WordNet 3.0 database folder, such as "
            f"the one the Debian package wordnet-base installs: apt-get install wordnet-base)"
        )
    for record in records:
        known = (base.info(record["wnid"]).record() if base and record["wnid"] in base else None) or lookup.get(record["wnid"])
        if known is None and not record.get("lemmas"):
            raise ValueError(f"class list {source}: {record['wnid']!r} is not a WordNet noun synset of {wordnet}; give its 'lemmas' in the class list")
        for key, value in (known or {}).items():
            if record.get(key) in (None, "", []):
                record[key] = value
        record.setdefault("name", record["lemmas"][0])
    ids = {r["wnid"] for r in records}
    for record in records:  # similar classes: those of the list, most similar first
        record["most_similar"] = [w for w in record.get("most_similar") or () if w in ids and w != record["wnid"]]


def _check_names(records: list[dict], source: str) -> None:
    first: dict[str, str] = {}
    for record in sorted(records, key=lambda r: r["wnid"]):
        key = record["name"].lower()
        if key in first:
            raise ValueError(
                f"class list {source}: classes {first[key]} and {record['wnid']} share the name {record['name']!r}; "
                f"give one a unique 'name' (a ClassLabel needs unique names)"
            )
        first[key] = record["wnid"]


def class_list_of(wnids: Sequence[str]) -> ClassList:
    """A ClassList for ``wnids``: ImageNet's facts where the id is an ImageNet class, else the id as name."""
    base = imagenet_1k()
    classes = tuple(base.info(w) if w in base else ClassInfo(w, w, (w,)) for w in sorted(set(wnids)))
    return ClassList(classes, "given ids")


def write_class_list(classes: ClassList) -> str:
    """The text of a JSON class list file for ``classes`` (what :func:`load_classes` reads back)."""
    return json.dumps([c.record() for c in classes.classes], indent=1, ensure_ascii=False) + "\n"

"""Candidates from images a maintainer already has: a folder of class folders, or a dataset.

``search --from-folder DIR`` reads ``DIR/<class id>/<any name>.<image>``; ``search --from-dataset
SPEC`` reads any dataset ``datasets.load_dataset`` opens (``PATH_OR_HUB_ID[:CONFIG][@SPLIT]``)
with an image column and a class column (a ``ClassLabel`` or strings, naming class ids or the
class list's names). Both write, into one output folder (replaced atomically)::

    candidates.jsonl   one record per image: id_ours, wnid, search_engine ("folder"/"dataset"), source
    images/            the image store of :mod:`pipeline.rebuild.stored_images` (what download writes)

The candidate id is stable: the sha1 of the image's bytes; the same bytes under two classes
become one candidate per class, ``sha1("<bytes sha1>,<wnid>")``, with ``also_found_for``. The
same bytes twice in one class are one candidate. Files that are not images are listed in
``images/failures.jsonl`` and left out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from pipeline.core.ownership import owned_directory
from pipeline.rebuild.classes import ClassList
from pipeline.rebuild.stored_images import NotAnImage, store_image, write_lists

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

COMMAND = "search"
CANDIDATES = "candidates.jsonl"
STORE = "images"
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"}


def folder_images(folder: PathLike, classes: ClassList) -> Iterator[tuple[str, str, bytes]]:
    """``(class id, source, bytes)`` for each image file under ``folder/<class id>/``, in sorted order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--from-folder {folder} is not a folder of class folders")
    subfolders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subfolders:
        raise ValueError(f"--from-folder {folder}: no class folders; put each class's images in a folder named by its class id")
    classes.check_ids([p.name for p in subfolders], f"--from-folder {folder} (folder names)")
    for sub in subfolders:
        for root, dirs, files in os.walk(sub):
            dirs.sort()
            for name in sorted(files):
                if Path(name).suffix.lower() in IMAGE_SUFFIXES and not name.startswith("."):
                    path = Path(root) / name
                    yield sub.name, path.relative_to(folder).as_posix(), path.read_bytes()


def parse_spec(text: str) -> tuple[str, Optional[str], Optional[str]]:
    """``PATH_OR_HUB_ID[:CONFIG][@SPLIT]`` → (path, config, split); an existing path is taken whole.

    >>> parse_spec("uoft-cs/cifar10@test"), parse_spec("user/set:small")
    (('uoft-cs/cifar10', None, 'test'), ('user/set', 'small', None))
    """
    if Path(text).exists():
        return text, None, None
    match = re.fullmatch(r"(.+?)(?::([^/:@]+))?(?:@([^/:@]+))?", text)
    return match.group(1), match.group(2), match.group(3)


def _columns(features, spec: str, image_column: Optional[str], class_column: Optional[str]) -> tuple[str, str]:
    from datasets import ClassLabel, Image, Value

    images = [n for n, f in features.items() if isinstance(f, Image)]
    labels = [n for n, f in features.items() if isinstance(f, ClassLabel) or (isinstance(f, Value) and f.dtype == "string")]
    image = image_column or (images[0] if len(images) == 1 else None)
    label = class_column or next((n for n in ("label", "labels", "wnid", "class") if n in labels), labels[0] if len(labels) == 1 else None)
    if image not in features or not isinstance(features[image], Image):
        raise ValueError(f"--from-dataset {spec}: no image column found (columns: {', '.join(features)}); pass --image-column NAME")
    if label not in features:
        raise ValueError(f"--from-dataset {spec}: no class column found (columns: {', '.join(features)}); pass --class-column NAME")
    return image, label


def dataset_images(spec: str, classes: ClassList, *, image_column: Optional[str] = None, class_column: Optional[str] = None) -> Iterator[tuple[str, str, bytes]]:
    """``(class id, source, bytes)`` for each row of a dataset (see the module docs)."""
    import datasets

    path, config, split = parse_spec(spec)
    loaded = datasets.load_dataset(path, config, split=split)
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise ValueError(f"--from-dataset {spec}: it has the splits {', '.join(loaded)}; name one, e.g. {path}@{next(iter(loaded))}")
        loaded = next(iter(loaded.values()))
    image, label = _columns(loaded.features, spec, image_column, class_column)
    names = loaded.features[label].names if isinstance(loaded.features[label], datasets.ClassLabel) else None
    by_name = {name.lower(): wnid for wnid, name in zip(classes.wnids, classes.names)}
    table = loaded.cast_column(image, datasets.Image(decode=False))
    for row_index, row in enumerate(table.select_columns([image, label])):
        value = names[row[label]] if names is not None else row[label]
        wnid = value if value in classes else by_name.get(str(value).lower())
        if wnid is None:
            raise ValueError(f"--from-dataset {spec} row {row_index}: class {value!r} is neither an id nor a name of the class list {classes.source}")
        cell = row[image]
        data = cell.get("bytes") or (Path(cell["path"]).read_bytes() if cell.get("path") else b"")
        yield wnid, f"{spec} row {row_index}", data


def candidates_from_images(items: Iterable[tuple[str, str, bytes]], output: PathLike, engine: str, *, inputs=()) -> dict:
    """Write ``candidates.jsonl`` and the image store for ``items`` into ``output``; return the counts."""
    from tqdm.auto import tqdm

    with owned_directory(output, COMMAND, inputs=inputs) as tmp:
        store = tmp / STORE
        store.mkdir()
        records, stored, failures, repeats = _collect(tqdm(items, unit="image", leave=False, disable=None), store, engine)
        with open(tmp / CANDIDATES, "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
        write_lists(store, stored, failures)
    counts = {"candidates": len(records), "not_images": len(failures), "repeated_in_class": repeats,
              "classes": len({r["wnid"] for r in records})}
    logger.info("%s: %s", output, counts)
    return counts


def _collect(items, store: Path, engine: str) -> tuple[list[dict], list[dict], list[dict], int]:
    seen: dict[tuple[str, str], bool] = {}
    pending, failures, repeats = [], [], 0
    for wnid, source, data in items:
        digest = hashlib.sha1(data).hexdigest()
        if (digest, wnid) in seen:
            repeats += 1
            continue
        seen[(digest, wnid)] = True
        pending.append((wnid, source, data, digest))
    classes_of: dict[str, list[str]] = {}
    for wnid, _, _, digest in pending:
        classes_of.setdefault(digest, []).append(wnid)
    records, stored = [], []
    for wnid, source, data, digest in pending:
        shared = sorted(classes_of[digest])
        cid = digest if len(shared) == 1 else hashlib.sha1(f"{digest},{wnid}".encode()).hexdigest()
        try:
            entry = store_image(store, cid, wnid, data, source=source)
        except NotAnImage as e:
            failures.append({"candidate_id": cid, "url": None, "kind": "not an image", "reason": str(e), "source": source})
            continue
        record = {"id_ours": cid, "wnid": wnid, "search_engine": engine, "search_key": None, "url": None,
                  "width": entry["width"], "height": entry["height"], "source": source}
        if len(shared) > 1:
            record["also_found_for"] = [w for w in shared if w != wnid]
        records.append(record)
        stored.append(entry)
    return records, stored, failures, repeats

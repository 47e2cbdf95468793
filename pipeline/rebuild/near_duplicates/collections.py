"""Image collections for the near-duplicate search: a pool, a folder, an image table or a dataset.

Every image has a stable id within its collection, and the collection a ``name`` (the spec as
given) that the outputs record as ``reference_source``:

- a pool folder (written by ``ingest``): the candidate id; the class is the candidate's wnid;
  the near-duplicate copy when there is one (the 256 x 256 ``near_duplicate/`` copy beside the
  pool's annotation copy in a ``download`` store, or a ``near_duplicate_path`` /
  ``near_duplicate_image`` column of the images table), else the stored image;
- a ``download`` image store (``images.jsonl``): the candidate id and wnid, the 256 x 256 copy;
- a folder of image files: the path relative to the folder (``n01440764/a.jpg``); the class is
  the first folder when it is a class of the class list;
- a Parquet image table: the ``--id-column``, else ``candidate_id``, ``image_id`` or ``id``, and
  the image bytes in ``image`` (binary, or a ``{bytes, path}`` struct as datasets writes it);
- a dataset ``PATH_OR_HUB_ID[:CONFIG][@SPLIT]`` (the ``evaluate`` syntax): the ``--id-column``
  value, else the row index; the class from a ``ClassLabel`` whose names are class ids, or by
  index when it has as many classes as the class list (ImageNet's order).

>>> import tempfile, pathlib
>>> from pipeline.toys.synthetic import tiny_jpeg
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "b.jpg").write_bytes(tiny_jpeg(1)); _ = (root / "a.jpg").write_bytes(tiny_jpeg(2))
>>> folder = open_collection(str(root))
>>> folder.kind, folder.ids
('folder', ['a.jpg', 'b.jpg'])
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".jpe")
ID_COLUMNS = ("candidate_id", "image_id", "id")
DATASET_SUFFIXES = (".parquet", ".arrow", ".json", ".tar", ".csv", ".jsonl")


@dataclass
class ImageCollection:
    """Ids, classes and a reader of image bytes (or a file path) for one collection."""

    name: str  # as given on the command line; recorded as reference_source
    kind: str  # pool, folder, table, dataset
    key: str  # identifies the collection in the feature cache
    ids: list
    wnids: list  # class id per image, or None
    read: Callable[[int], bytes | Path] = field(repr=False)

    def __len__(self) -> int:
        return len(self.ids)


def _key(*parts: object) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:20]


def _check_ids(name: str, ids: Sequence, where: str) -> list:
    ids = [None if i is None else str(i) for i in ids]
    missing = [n for n, i in enumerate(ids) if i is None or i == ""]
    if missing:
        raise ValueError(f"collection {name!r}: {len(missing)} image(s) have no id in {where} (first at row {missing[0]}); every image needs one")
    seen: dict = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    twice = [i for i, n in seen.items() if n > 1]
    if twice:
        raise ValueError(f"collection {name!r}: id {twice[0]!r} appears {seen[twice[0]]} times in {where}; ids must be unique")
    if not ids:
        raise ValueError(f"collection {name!r} is empty: no images to compare; give a folder, table, pool or dataset with images")
    return ids


def open_collection(spec: str, *, id_column: str | None = None, classes=None) -> ImageCollection:
    """Open ``spec``: a pool folder, a folder of images, a Parquet image table, or a dataset spec."""
    path = Path(spec)
    if path.is_dir() and (path / "candidates.parquet").is_file():
        return _pool(spec, path)
    if path.is_dir() and (path / "images.jsonl").is_file():
        return _store(spec, path)
    if path.is_dir() and any(p.suffix.lower() in IMAGE_SUFFIXES for p in path.rglob("*")):
        return _folder(spec, path, classes)  # a folder holding image files; else a dataset folder
    if path.is_dir() and not any(p.suffix in DATASET_SUFFIXES for p in path.rglob("*")):
        raise ValueError(f"collection {spec!r} is empty: the folder holds no image files ({', '.join(IMAGE_SUFFIXES[:4])}, ...) and no dataset")
    if path.is_file() and path.suffix.lower() == ".parquet":
        return _table(spec, path, id_column, classes)
    if path.is_file():
        raise ValueError(f"{spec}: a file that is not a Parquet image table; give a folder of images, a pool, a .parquet table or a dataset spec")
    return _dataset(spec, id_column, classes)


def _pool(spec: str, root: Path) -> ImageCollection:
    import pyarrow.parquet as pq

    from pipeline.rebuild.pool import POOL_FILES, load_pool

    pool = load_pool(root, ("candidates", "images"))
    wnid_of = dict(zip(pool.candidates.column("candidate_id").to_pylist(), pool.candidates.column("wnid").to_pylist()))
    store = pool.image_bytes()
    raw = pq.read_table(root / POOL_FILES["images"])
    copies: dict = {}
    for column in ("near_duplicate_image", "near_duplicate_path"):
        if column in raw.column_names:
            for cid, value in zip(raw.column("candidate_id").to_pylist(), raw.column(column).to_pylist()):
                if value is not None and cid not in copies:
                    copies[cid] = value if column.endswith("image") else (Path(value) if os.path.isabs(value) else root / value)
    for cid, value in store.items():  # a download store's annotation copy has its 256 x 256 copy beside it
        if cid not in copies and isinstance(value, Path) and value.parent.parent.name == "annotation":
            candidate = value.parent.parent.parent / "near_duplicate" / value.parent.name / f"{cid}.jpeg"
            if candidate.is_file():
                copies[cid] = candidate
    ids = _check_ids(spec, sorted(store), f"{root / POOL_FILES['images']}")
    unknown = [i for i in ids if i not in wnid_of]
    if unknown:
        raise ValueError(f"pool {spec}: image(s) of {unknown[0]!r} have no candidate record; re-run ingest")

    def read(i: int):
        return copies.get(ids[i], store[ids[i]])

    return ImageCollection(spec, "pool", _key("pool", root.resolve()), ids, [wnid_of[i] for i in ids], read)


def _store(spec: str, root: Path) -> ImageCollection:
    from pipeline.rebuild.records import read_records

    records = [record for _, record in read_records(root / "images.jsonl")]
    ids = _check_ids(spec, [r.get("candidate_id") for r in records], f"{root / 'images.jsonl'}")
    paths = [root / (r.get("near_duplicate") or r.get("annotation") or r["original"]) for r in records]
    return ImageCollection(spec, "store", _key("store", root.resolve()), ids, [r.get("wnid") for r in records], lambda i: paths[i])


def _folder(spec: str, root: Path, classes) -> ImageCollection:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    ids = _check_ids(spec, [p.relative_to(root).as_posix() for p in files], f"the folder {root}")
    known = set(classes.wnids) if classes is not None else set()
    wnids = [i.split("/")[0] if "/" in i and i.split("/")[0] in known else None for i in ids]
    return ImageCollection(spec, "folder", _key("folder", root.resolve()), ids, wnids, lambda i: files[i])


def _image_bytes(value) -> bytes | Path | None:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return value["bytes"]
        if value.get("path"):
            return Path(value["path"])
    if isinstance(value, str):
        return Path(value)
    return None


def _table(spec: str, path: Path, id_column: str | None, classes) -> ImageCollection:
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    column = id_column or next((c for c in ID_COLUMNS if c in names), None)
    if column is None or column not in names:
        wanted = repr(id_column) if id_column else " or ".join(ID_COLUMNS)
        raise ValueError(f"image table {spec} has no id column {wanted} (columns: {', '.join(names)}); name one with --id-column")
    if "image" not in names:
        raise ValueError(f"image table {spec} has no 'image' column with the image bytes (columns: {', '.join(names)})")
    table = pq.read_table(path, columns=[column] + [c for c in ("wnid",) if c in names])
    ids = _check_ids(spec, table.column(column).to_pylist(), f"column {column!r} of {path}")
    wnids = table.column("wnid").to_pylist() if "wnid" in table.column_names else [None] * len(ids)
    batches = pq.ParquetFile(path)
    cache: dict = {}

    def read(i: int):
        group, row = _row_group_of(batches, i)
        if cache.get("group") != group:
            cache["group"], cache["images"] = group, batches.read_row_group(group, columns=["image"]).column("image").to_pylist()
        value = _image_bytes(cache["images"][row])
        if isinstance(value, Path) and not value.is_absolute():
            value = path.parent / value
        return value

    return ImageCollection(spec, "table", _key("table", path.resolve()), ids, wnids, read)


def _row_group_of(parquet_file, i: int) -> tuple[int, int]:
    start = 0
    for group in range(parquet_file.num_row_groups):
        rows = parquet_file.metadata.row_group(group).num_rows
        if i < start + rows:
            return group, i - start
        start += rows
    raise IndexError(i)


def _dataset(spec: str, id_column: str | None, classes) -> ImageCollection:
    import datasets

    from pipeline.evaluation.datasets_spec import (
        parse_dataset_spec,
        resolve_split,
    )

    parsed = parse_dataset_spec(spec)
    split = resolve_split(parsed)
    try:
        table = datasets.load_dataset(parsed.path, parsed.config, split=split)
    except Exception as e:
        raise ValueError(f"cannot load dataset {spec!r} (split {split!r}): {e}") from e
    images = [k for k, f in table.features.items() if isinstance(f, datasets.Image)]
    image = next((k for k in ("image", "img") if k in images), images[0] if len(images) == 1 else None)
    if image is None:
        raise ValueError(f"dataset {spec!r} has no image column (an Image feature named 'image' or 'img'); columns {table.column_names}")
    if id_column is not None and id_column not in table.column_names:
        raise ValueError(f"dataset {spec!r} has no id column {id_column!r} (columns: {', '.join(table.column_names)}); name another with --id-column")
    ids = _check_ids(spec, table[id_column] if id_column else [str(i) for i in range(table.num_rows)], f"dataset {spec!r}")
    wnids = _dataset_wnids(table, classes)
    table = table.cast_column(image, datasets.Image(decode=False))

    def read(i: int):
        return _image_bytes(table[i][image])

    fingerprint = getattr(table, "_fingerprint", "")
    return ImageCollection(spec, "dataset", _key("dataset", parsed.path, parsed.config, split, fingerprint), ids, wnids, read)


def _dataset_wnids(table, classes) -> list:
    import datasets

    labels = [k for k, f in table.features.items() if isinstance(f, datasets.ClassLabel)]
    label = next((k for k in ("label", "labels") if k in labels), labels[0] if len(labels) == 1 else None)
    if label is None or classes is None:
        return [None] * table.num_rows
    names = table.features[label].names
    if all(n in classes for n in names):
        mapping = list(names)
    elif len(names) == len(classes):
        mapping = list(classes.wnids)
    else:
        return [None] * table.num_rows
    return [mapping[v] if v is not None and v >= 0 else None for v in table[label]]


def open_image(source: bytes | Path):
    """A Pillow image, EXIF orientation applied, RGB; ``OSError``/``ValueError`` if unreadable."""
    from PIL import Image, ImageOps

    image = Image.open(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
    image = ImageOps.exif_transpose(image)
    return image.convert("RGB")

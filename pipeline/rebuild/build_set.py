"""The ``build-set`` stage: revisions plus the image store → release-layout archives and a Hub-ready folder.

For each revision (its rule names the config: matched-frequency, threshold-0.7, top-images) the
stage writes the set in the release layout, ``<top folder>/<class index>/<candidate id>.jpeg``,
as a plain tar named like the released archive, then builds the Hub-ready folder through the
ImageNetV2 builder and the shared exporter, exactly as the released sets are built, with the
rebuilt revision and the new archive's checksum in place of the pinned ones. Output::

    <output>/archives/<archive name>            one tar per config (deterministic bytes)
    <output>/archives/search_results/pool.json  the pool's search records of the chosen images
    <output>/hub/                               README.md card, data/<config>/test-*.parquet,
                                                revisions/<config>.json (+ .report.json)
    <output>/build-set.json                     configs, revisions, archive checksums

The whole output folder is written atomically and marked (:mod:`pipeline.core.ownership`);
re-running replaces it only if build-set wrote it. Every revision's ``(candidate id, wnid)``
pairs are checked against the pool first: the label of an image is the pool's.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from pipeline.core.atomic import atomic_file
from pipeline.core.integrity import FileChecksum, file_digest
from pipeline.core.ownership import check_output_dir, owned_directory
from pipeline.rebuild.revision import Revision, load_revision

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
MANIFEST = "build-set.json"
ARCHIVE_MTIME = 1544659200  # 2018-12-13, the day the final revisions were sampled; fixed so tars are reproducible
JPEG_MAGIC = b"\xff\xd8"
SEARCH_RECORDS = "search_results/pool.json"


@dataclass(frozen=True)
class BuiltSet:
    config: str
    revision: str
    archive: FileChecksum
    images: int


def config_of(revision: Revision) -> str:
    """The ImageNetV2 config a revision's rule makes (the rule names are the config names)."""
    return revision.config.rule


def write_release_tar(revision: Revision, images: Mapping[str, "bytes | Path"], top_folder: str, path: PathLike, class_index: Optional[Mapping[str, int]] = None) -> FileChecksum:
    """Write the revision's images as a tar in the release layout; return its checksum.

    ``images`` maps candidate id → the image's bytes or its file. Members are sorted (class
    index, candidate id) with fixed owner, mode and time, so equal inputs give byte-identical
    archives. Every image must exist and be a JPEG.
    """
    from imagenetv2.classes import wnid_to_index

    index = wnid_to_index() if class_index is None else class_index  # folder = the class's index in its class list
    members = sorted((index[wnid], cid) for cid, wnid in revision.image_filenames)
    missing = [cid for _, cid in members if cid not in images]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} image(s) of revision {revision.name} are not in the image store, e.g. {', '.join(missing[:3])}; "
            f"ingest them with --images"
        )

    def info(name: str, kind: bytes, size: int = 0) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(name)
        entry.type, entry.size, entry.mtime = kind, size, ARCHIVE_MTIME
        entry.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
        entry.uid = entry.gid = 0
        entry.uname = entry.gname = ""
        return entry

    with atomic_file(path, "wb") as f:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            tar.addfile(info(top_folder, tarfile.DIRTYPE))
            for class_index in sorted({c for c, _ in members}):
                tar.addfile(info(f"{top_folder}/{class_index}", tarfile.DIRTYPE))
            for class_index, cid in members:
                source = images[cid]
                if isinstance(source, bytes):
                    data, source = source, "embedded in the image store"
                else:
                    try:
                        data = Path(source).read_bytes()
                    except FileNotFoundError:
                        raise FileNotFoundError(f"image of candidate {cid} is missing: {source} (the image store points there)") from None
                if not data.startswith(JPEG_MAGIC):
                    raise ValueError(f"image of candidate {cid} ({source}) is not a JPEG; the release layout holds JPEG files, convert it first")
                tar.addfile(info(f"{top_folder}/{class_index}/{cid}.jpeg", tarfile.REGTYPE, len(data)), io.BytesIO(data))
    digest = file_digest(path)
    return FileChecksum(Path(path).name, digest.size, digest.sha256)


def _search_records(candidates, wanted: set) -> list[dict]:
    from pipeline.rebuild.tables import SOURCE_FIELDS

    records = []
    for row in candidates.filter(_is_in(candidates.column("candidate_id"), sorted(wanted))).to_pylist():
        record = {"id_ours": row["candidate_id"], "wnid": row["wnid"]}
        record |= {c.name: row[c.name] for c in SOURCE_FIELDS if row.get(c.name) is not None}
        records.append(record)
    return sorted(records, key=lambda r: r["id_ours"])


def _is_in(column, values):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(column, pa.array(values, pa.string()))


def rebuilt_card_body(built: Sequence[BuiltSet], reports: Mapping[str, dict]):
    """The card prose of a rebuilt set (a function of the exported datasets, as the exporter wants)."""

    def body(by_config) -> str:
        rows = []
        for b in built:
            r = reports.get(b.config, {})
            mean = (r.get("mean_selection_frequency") or {})
            rows.append(
                f"| `{b.config}` | `{b.revision}` | {b.images:,} | {r.get('is_valid', '?')} | "
                f"{r.get('config', {}).get('seed', '?')} | {r.get('upward_sampled', 0)} | "
                f"{_fmt(mean.get('set'))} | {_fmt(mean.get('originals'))} |"
            )
        table = "\n".join(
            ["| config | revision | images | valid | seed | filled upward | mean selection frequency | of the originals |",
             "|---|---|---:|---|---:|---:|---:|---:|", *rows]
        )
        example = built[0].config
        return f"""
# ImageNetV2, rebuilt

Test sets rebuilt from an annotated candidate pool with the ImageNetV2 pipeline
(`python -m pipeline`), by the sampling rules of Recht, Roelofs, Schmidt and Shankar,
"Do ImageNet Classifiers Generalize to ImageNet?" (ICML 2019). Each config's revision file,
with every setting needed to sample it again (rule, seed, thresholds, bins), is in
`revisions/<config>.json`, and its report (exclusions per reason, slots filled upward, mean
selection frequencies) in `revisions/<config>.report.json`.

{table}

```python
from datasets import load_dataset

test = load_dataset("<this folder or repo>", "{example}", split="test")
```

Columns and labels are those of ImageNetV2: `label` indexes the 1,000 ImageNet classes in the
standard order (sorted WordNet ids), `wnid` and `candidate_id` name the class and the image.
"""

    return body


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def check_pairs(revision: Revision, source: PathLike, wnid_of: Mapping[str, str]) -> None:
    """Every ``(candidate id, wnid)`` pair of ``revision`` must be the pool's: the label comes from the pool."""
    for i, (cid, wnid) in enumerate(revision.image_filenames):
        pool_wnid = wnid_of.get(cid)
        if pool_wnid is None:
            raise ValueError(f"revision {source}: image_filenames[{i}] {cid} is not a candidate of the pool; build from the pool it was sampled from")
        if pool_wnid != wnid:
            raise ValueError(
                f"revision {source}: image_filenames[{i}] pairs candidate {cid} with {wnid}, but the pool has it under {pool_wnid}; "
                f"the revision does not belong to this pool (or was edited): sample it again from this pool"
            )


def build_set(
    pool: PathLike,
    revisions: Sequence[PathLike],
    output: PathLike,
    *,
    allow_invalid: bool = False,
    classes=None,
) -> list[BuiltSet]:
    """Build the archives and the Hub-ready folder for ``revisions`` (one per rule) into ``output``.

    ``classes`` (a :class:`pipeline.rebuild.classes.ClassList`; default ImageNet-1k) names the
    labels: for another class list the folder is exported without the ImageNetV2 builder
    (:mod:`pipeline.rebuild.class_list_export`), its ``ClassLabel`` being the list's names.
    """
    other_classes = classes is not None and not classes.is_imagenet_1k
    import imagenetv2
    from imagenetv2 import PACKAGE

    from pipeline.core.export import build_configs, write_hub_folder
    from pipeline.rebuild.pool import load_pool

    output = Path(output)
    check_output_dir(output, "build-set", inputs=[pool, *revisions])
    by_config = _revisions_by_config(revisions, allow_invalid)
    configs = [c for c in imagenetv2.CONFIG_NAMES if c in by_config]
    pool_tables = load_pool(pool, ("candidates", "images"))
    wnid_of = dict(zip(*pool_tables.candidates.select(["candidate_id", "wnid"]).to_pydict().values()))
    for path, revision in by_config.values():
        check_pairs(revision, path, wnid_of)
    images = pool_tables.image_bytes()
    reports = {config: _report_of(path) for config, (path, _) in by_config.items()}

    cache = Path(tempfile.mkdtemp(prefix="build-set-cache-"))
    try:
        with owned_directory(output, "build-set", inputs=[pool, *revisions]) as tmp:
            archives = tmp / "archives"
            built, builder_kwargs = _write_archives(archives, configs, by_config, images, {w: i for i, w in enumerate(classes.wnids)} if other_classes else None)
            wanted = {cid for _, revision in by_config.values() for cid, _ in revision.image_filenames}
            (archives / SEARCH_RECORDS).parent.mkdir(parents=True, exist_ok=True)
            (archives / SEARCH_RECORDS).write_text(json.dumps(_search_records(pool_tables.candidates, wanted), indent=1), encoding="utf-8")
            if other_classes:
                from pipeline.rebuild.class_list_export import write_class_list_folder

                write_class_list_folder(tmp / "hub", by_config, configs, pool_tables.candidates, images, classes, _revision_files(configs, by_config))
            else:
                exports = build_configs(PACKAGE, configs, data_dir=str(archives), cache_dir=str(cache), builder_kwargs=builder_kwargs)
                card_extra = dict(PACKAGE.card_extra()) | {"pretty_name": "ImageNetV2 (rebuilt)", "size_categories": [_size_category(max(b.images for b in built))]}
                write_hub_folder(tmp / "hub", exports, rebuilt_card_body(built, reports), card_extra, extra_files=_revision_files(configs, by_config))
            (tmp / MANIFEST).write_text(json.dumps(_manifest(built, by_config), indent=2) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    logger.info("wrote %s: %s", output, ", ".join(f"{b.config} ({b.images} images)" for b in built))
    return built


def _revisions_by_config(revisions: Sequence[PathLike], allow_invalid: bool) -> dict[str, tuple[Path, Revision]]:
    loaded = [(Path(p), load_revision(p)) for p in revisions]
    if not loaded:
        raise ValueError("no revisions given; pass at least one revision file made by `python -m pipeline sample`")
    by_config: dict[str, tuple[Path, Revision]] = {}
    for path, revision in loaded:
        config = config_of(revision)
        if config in by_config:
            raise ValueError(f"two revisions for config {config}: {by_config[config][0]} and {path}; give one per rule")
        if not revision.is_valid and not allow_invalid:
            raise ValueError(
                f"revision {path} is marked invalid (is_valid: false; its report says why); sample a valid one, "
                f"or pass --allow-invalid to build it anyway"
            )
        by_config[config] = (path, revision)
    return by_config


def _report_of(revision_path: Path) -> dict:
    from pipeline.rebuild.revision import output_paths

    report_path = output_paths(revision_path)[1]
    return json.loads(report_path.read_text("utf-8")) if report_path.is_file() else {}


def _write_archives(archives: Path, configs, by_config, images, class_index=None) -> tuple[list[BuiltSet], dict]:
    from imagenetv2 import get_variant

    built, builder_kwargs = [], {}
    for config in configs:
        path, revision = by_config[config]
        variant = get_variant(config)
        logger.info("writing %s (%d images) in the release layout", variant.archive.name, len(revision.image_filenames))
        checksum = write_release_tar(revision, images, variant.top_folder, archives / variant.archive.name, class_index)
        built.append(BuiltSet(config, revision.name, checksum, len(revision.image_filenames)))
        builder_kwargs[config] = {"revision_file": str(path), "archive_checksum": checksum}
    return built, builder_kwargs


def _revision_files(configs, by_config) -> dict[str, bytes]:
    from pipeline.rebuild.revision import output_paths

    extra = {}
    for config in configs:
        path, _ = by_config[config]
        extra[f"revisions/{config}.json"] = path.read_bytes()
        report_path = output_paths(path)[1]
        if report_path.is_file():
            extra[f"revisions/{config}.report.json"] = report_path.read_bytes()
    return extra


def _manifest(built: Sequence[BuiltSet], by_config) -> dict:
    return {
        "configs": {
            b.config: {"revision": b.revision, "revision_file": by_config[b.config][0].name, "images": b.images,
                       "archive": {"name": b.archive.name, "size": b.archive.size, "sha256": b.archive.sha256}}
            for b in built
        },
    }


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"

"""The Hub-ready folder of sets rebuilt on a class list other than ImageNet-1k.

The ImageNetV2 builder keeps its 1,000 classes, so ``build-set --classes FILE`` exports such sets
without it: one ``datasets.Dataset`` per config with ImageNetV2's columns, whose ``label`` is a
``ClassLabel`` of the class list's names (index = position in the sorted ids), written through
:func:`pipeline.core.export.write_hub_folder` like every other Hub-ready folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from pipeline.rebuild.classes import ClassList


def class_list_features(classes: ClassList):
    """ImageNetV2's features with the class list's names as the ``label`` ClassLabel."""
    import datasets

    from imagenetv2.features import imagenetv2_features

    features = imagenetv2_features()
    features["label"] = datasets.ClassLabel(names=list(classes.names))
    return features


def set_rows(image_filenames: Sequence[tuple[str, str]], candidates, images: Mapping[str, "bytes | Path"], classes: ClassList):
    """The rows of one set, sorted by (label, candidate id), as a ``datasets.Dataset``."""
    import datasets
    import pyarrow.compute as pc

    from imagenetv2.features import METADATA_FIELDS

    wanted = sorted({cid for cid, _ in image_filenames})
    records = {r["candidate_id"]: r for r in candidates.filter(pc.is_in(candidates.column("candidate_id"), value_set=_array(wanted))).to_pylist()}
    rows = []
    for cid, wnid in sorted(image_filenames, key=lambda pair: (classes.index(pair[1]), pair[0])):
        source = images[cid]
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        record = records.get(cid, {})
        row = {"image": {"bytes": data, "path": None}, "label": classes.index(wnid), "wnid": wnid, "candidate_id": cid}
        row |= {column: record.get(field) for column, field in METADATA_FIELDS.items()}
        rows.append(row)
    columns = {name: [row[name] for row in rows] for name in class_list_features(classes)}
    return datasets.Dataset.from_dict(columns, features=class_list_features(classes))


def _array(values):
    import pyarrow as pa

    return pa.array(values, pa.string())


def card_body(classes: ClassList, sets: Sequence[tuple[str, str, int]]) -> str:
    """The card's prose: the class list, and each config's revision and size."""
    table = "\n".join(["| config | revision | images |", "|---|---|---:|", *(f"| `{c}` | `{r}` | {n:,} |" for c, r, n in sets)])
    return f"""
# Test sets rebuilt on a class list of {len(classes)} classes

Sampled from an annotated candidate pool with the ImageNetV2 pipeline (`python -m pipeline`), by
the sampling rules of Recht et al., "Do ImageNet Classifiers Generalize to ImageNet?" (ICML 2019),
on the class list `{Path(classes.source).name}`. Each config's revision file is in
`revisions/<config>.json`.

{table}

`label` indexes the classes in the order of their sorted ids (`wnid`); its names are the class
list's names. The other columns are those of ImageNetV2.
"""


def write_class_list_folder(hub: Path, by_config: Mapping[str, tuple[Path, object]], configs: Sequence[str], candidates,
                            images: Mapping[str, "bytes | Path"], classes: ClassList, extra_files: Mapping[str, bytes]) -> Path:
    """Write the Hub-ready folder ``hub`` of the revisions in ``by_config`` (``{config: (path, revision)}``)."""
    from pipeline.core.export import ConfigExport, write_hub_folder

    exports, sets = [], []
    for i, config in enumerate(configs):
        path, revision = by_config[config]
        classes.check_ids({w for _, w in revision.image_filenames}, f"revision {path}")
        exports.append(ConfigExport(config, set_rows(revision.image_filenames, candidates, images, classes), default=i == 0))
        sets.append((config, revision.name, len(revision.image_filenames)))
    extra = {"row_id": "candidate_id", "license": "other", "task_categories": ["image-classification"], "pretty_name": f"Rebuilt test sets ({len(classes)} classes)"}
    return write_hub_folder(hub, exports, card_body(classes, sets), extra, extra_files=dict(extra_files), command="build-set")

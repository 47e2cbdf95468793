"""The CIFAR-10.1 dataset card: YAML keys besides configs/dataset_info, and the prose.

The tables (rows, class counts, keywords) are computed from the exported datasets, so the card
describes what is in the folder, not what was meant to be.
"""

from __future__ import annotations

from importlib import resources
from string import Template
from typing import Mapping, Sequence

import numpy as np

from .variants import CLASS_NAMES, DEFAULT_CONFIG, GITHUB_COMMIT, GITHUB_REPO, VARIANTS, get_variant

CITATION_FILE = "CITATIONS.bib"
TEMPLATE_FILE = "card_template.md"


def citations() -> str:
    """The BibTeX entries to cite (CIFAR-10.1, the ImageNetV2 paper, Tiny Images).

    >>> citations().count("@")
    3
    """
    return resources.files("cifar10_1").joinpath(CITATION_FILE).read_text("utf-8")


def card_extra() -> dict:
    """The card's YAML keys besides ``configs`` and ``dataset_info``."""
    return {
        "row_id": "ti_index",  # what identifies an image across releases (the publisher's change report)
        "license": "mit",
        "pretty_name": "CIFAR-10.1",
        "task_categories": ["image-classification"],
        "size_categories": ["1K<n<10K"],
        "annotations_creators": ["expert-generated"],
        "source_datasets": ["extended|other-80-Million-Tiny-Images"],
        "tags": ["cifar10", "distribution-shift", "test-set", "reproducibility"],
    }


def extra_files(config_names: Sequence[str] = ()) -> dict[str, bytes]:
    """Files exported beside the card (the same for every selection of configs)."""
    return {CITATION_FILE: citations().encode("utf-8")}


def class_counts(table) -> list[int]:
    """Images per class, in CIFAR-10's class order (``table``: the rows, e.g. a ``pyarrow.Table``)."""
    labels = np.asarray(table.column("label").to_numpy(), dtype=np.int64)
    return np.bincount(labels, minlength=len(CLASS_NAMES)).tolist()


def configs_table(exports: Mapping) -> str:
    header = "| config | images | " + " | ".join(CLASS_NAMES) + " | keywords | description |"
    rule = "|" + "---|" * (len(CLASS_NAMES) + 4)
    lines = [header, rule]
    for name, ds in exports.items():
        counts = " | ".join(str(n) for n in class_counts(ds))
        keywords = len(set(ds.column("keyword").to_pylist()))
        default = " (default)" if name == DEFAULT_CONFIG else ""
        lines.append(f"| `{name}`{default} | {ds.num_rows:,} | {counts} | {keywords} | {get_variant(name).description} |")
    return "\n".join(lines)


def _shared_images(exports: Mapping) -> str:
    if not {"v4", "v6"} <= set(exports):
        return ""
    v4, v6 = (set(exports[v].column("ti_index").to_pylist()) for v in ("v4", "v6"))
    return f" The two versions share {len(v4 & v6):,} Tiny Images indices."


def card_body(exports: Mapping) -> str:
    """The card's prose (``card_template.md``) for the exported configs ``{name: rows}``, the rows
    of each as a table with ``num_rows`` and ``column(name)`` (a ``pyarrow.Table``)."""
    names = [v.config_name for v in VARIANTS if v.config_name in exports]
    return Template(resources.files("cifar10_1").joinpath(TEMPLATE_FILE).read_text("utf-8")).substitute(
        github_repo=GITHUB_REPO,
        github_commit=GITHUB_COMMIT,
        configs_table=configs_table({n: exports[n] for n in names}),
        shared_images=_shared_images(exports),
        class_names=", ".join(CLASS_NAMES),
        citation=citations().strip(),
    )

"""The ImageNetV2 dataset card: YAML keys, and the prose of ``card_template.md`` filled from the
variants table and the exported rows.

>>> "@inproceedings{recht2019imagenet" in CITATION
True
"""

from __future__ import annotations

from importlib import resources
from string import Template
from typing import Mapping

from .classes import DISAMBIGUATED_NAMES, imagenet_classes
from .variants import DEFAULT_CONFIG, HUB_COMMIT, HUB_REPO, VARIANTS

HOMEPAGE = "https://github.com/modestyachts/ImageNetV2"
CITATION_FILE = "CITATIONS.bib"
TEMPLATE_FILE = "card_template.md"


def _package_text(name: str) -> str:
    return resources.files("imagenetv2").joinpath(name).read_text("utf-8")


CITATION = _package_text(CITATION_FILE)


def card_extra() -> dict:
    """The card's YAML besides ``configs`` and ``dataset_info``."""
    return {
        "row_id": "candidate_id",  # what identifies an image across releases (the publisher's change report)
        "pretty_name": "ImageNetV2",
        "license": "mit",
        "task_categories": ["image-classification"],
        "task_ids": ["multi-class-image-classification"],
        "language": ["en"],
        "size_categories": ["10K<n<100K"],
        "source_datasets": ["extended|imagenet-1k"],
        "tags": ["imagenet", "distribution-shift", "robustness", "test-set"],
    }


def metadata_counts(by_config: Mapping) -> str:
    """Rows and rows with a search record, per config (``by_config``: name → table of the rows)."""
    lines = []
    for name, table in by_config.items():
        with_record = table.num_rows - table.column("flickr_id").null_count
        lines.append(f"| `{name}` | {table.num_rows:,} | {with_record:,} |")
    return "\n".join(["| config | rows | rows with a search record |", "|---|---:|---:|", *lines])


def variants_table(names) -> str:
    rows = [
        f"| `{v.config_name}`{' (default)' if v.config_name == DEFAULT_CONFIG else ''} | {v.sampling_rule} | "
        f"`{v.revision}` | {v.description} |"
        for v in VARIANTS
        if v.config_name in names
    ]
    return "\n".join(["| config | sampling rule | revision | images |", "|---|---|---|---|", *rows])


def disambiguation() -> str:
    by_wnid = {c.wnid: c for c in imagenet_classes()}
    return "\n".join(
        f"- `{w}` (class {by_wnid[w].index}): **{name}** — WordNet lemmas: {', '.join(by_wnid[w].synset)}"
        for w, name in DISAMBIGUATED_NAMES.items()
    )


def card_body(by_config: Mapping) -> str:
    """The card's prose for the configs in ``by_config`` (config name → a table of its rows with
    ``num_rows`` and ``column(name)``, such as a ``pyarrow.Table``)."""
    names = list(by_config)
    return Template(_package_text(TEMPLATE_FILE)).substitute(
        variants_table=variants_table(names),
        example=DEFAULT_CONFIG if DEFAULT_CONFIG in names else names[0],
        disambiguation=disambiguation(),
        homepage=HOMEPAGE,
        metadata_counts=metadata_counts(by_config),
        methods="\n".join(f"- **{v.sampling_rule}** {v.method}" for v in VARIANTS),
        hub_repo=HUB_REPO,
        hub_commit=HUB_COMMIT,
        citation=CITATION.strip(),
    )


def revision_files(names=None) -> dict[str, bytes]:
    """The released revision files, as ``revisions/<config>.json`` for the Hub-ready folder."""
    files = {}
    for v in VARIANTS:
        if names is None or v.config_name in names:
            data = resources.files("imagenetv2").joinpath(f"data/{v.revision_file}").read_bytes()
            files[f"revisions/{v.config_name}.json"] = data
    return files


def extra_files(names=None) -> dict[str, bytes]:
    """Files exported beside the card: the revision files and ``CITATIONS.bib``."""
    return {**revision_files(names), CITATION_FILE: CITATION.encode("utf-8")}

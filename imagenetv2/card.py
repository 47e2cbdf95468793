"""The ImageNetV2 dataset card: YAML keys and prose, written from the variants table."""

from __future__ import annotations

from typing import Mapping

import datasets

from .builder import CITATION, HOMEPAGE
from .classes import DISAMBIGUATED_NAMES, imagenet_classes
from .variants import DEFAULT_CONFIG, HUB_COMMIT, HUB_REPO, VARIANTS


def card_extra() -> dict:
    """The card's YAML besides ``configs`` and ``dataset_info``."""
    return {
        "pretty_name": "ImageNetV2",
        "license": "mit",
        "task_categories": ["image-classification"],
        "task_ids": ["multi-class-image-classification"],
        "language": ["en"],
        "size_categories": ["10K<n<100K"],
        "source_datasets": ["extended|imagenet-1k"],
        "tags": ["imagenet", "distribution-shift", "robustness", "test-set"],
    }


def _metadata_counts(by_config: Mapping[str, datasets.Dataset]) -> str:
    lines = []
    for name, ds in by_config.items():
        with_record = sum(v is not None for v in ds.with_format("arrow")["flickr_id"].to_pylist())
        lines.append(f"| `{name}` | {ds.num_rows:,} | {with_record:,} |")
    return "\n".join(["| config | rows | rows with a search record |", "|---|---:|---:|", *lines])


def _variants_table(names) -> str:
    rows = [
        f"| `{v.config_name}`{' (default)' if v.config_name == DEFAULT_CONFIG else ''} | {v.sampling_rule} | "
        f"`{v.revision}` | {v.description} |"
        for v in VARIANTS
        if v.config_name in names
    ]
    return "\n".join(["| config | sampling rule | revision | images |", "|---|---|---|---|", *rows])


def _disambiguation() -> str:
    by_wnid = {c.wnid: c for c in imagenet_classes()}
    return "\n".join(
        f"- `{w}` (class {by_wnid[w].index}): **{name}** — WordNet lemmas: {', '.join(by_wnid[w].synset)}"
        for w, name in DISAMBIGUATED_NAMES.items()
    )


def card_body(by_config: Mapping[str, datasets.Dataset]) -> str:
    """The card's prose for the configs in ``by_config`` (config name → its test split)."""
    names = list(by_config)
    example = names[0] if DEFAULT_CONFIG not in names else DEFAULT_CONFIG
    return f"""
# ImageNetV2

ImageNetV2 is a new test set for ImageNet, built by repeating the original data collection
process ten years later ([Recht, Roelofs, Schmidt and Shankar, ICML 2019](https://arxiv.org/abs/1902.10811)).
Every model tested loses 3 to 15 points of top-1 accuracy, yet models keep their order, and new
accuracy is close to a linear function of original accuracy (new ≈ 1.11 · original − 20.2, in
percent).

There are three test sets of 10,000 Flickr images each, 10 per class for the 1,000 ImageNet
classes, drawn from one annotated candidate pool by three sampling rules on each image's
*selection frequency*: the fraction of crowd workers who said the image shows its class.

{_variants_table(names)}

## Loading

```python
from datasets import load_dataset

test = load_dataset("imagenetv2", "{example}", split="test")   # this folder, or its Hub repo id
image, label = test[0]["image"], test[0]["label"]
test.features["label"].int2str(label), test[0]["wnid"]
```

`load_dataset(..., streaming=True)` works too. Labels are indices into the 1,000 ImageNet classes
in the standard order (sorted WordNet ids), the order every ImageNet-1k classifier uses.

## The label trap

The archives name their class folders `0` … `999`: the class *index* in the standard order. Do
not load the extracted archive with `torchvision.datasets.ImageFolder`: it sorts folder names as
strings (`0`, `1`, `10`, `100`, …) and so gives every class past `1` a wrong label. This dataset
carries the right label, and the `wnid` column, for every image.

## Columns

- `image`: the original JPEG, byte for byte as in the released archive.
- `label`: ClassLabel over the 1,000 classes; names are each class's first WordNet lemma, made
  unique where two classes share one. The two classes named "crane" (and two other clashes) are
  told apart like this:
{_disambiguation()}
- `wnid`: the WordNet id of the class.
- `candidate_id`: the image's id in the candidate pool (the archive's file name): the SHA-1 of
  the Flickr photo id and "flickr".
- `flickr_id`, `url`, `date_taken`, `date_uploaded`, `search_key`, `width`, `height`: the
  image's Flickr search record; null where the record is not known. The records come from the
  search-result files of the [ImageNetV2 repository]({HOMEPAGE}) (the package ships the records
  of 4,745 final-set images; the full files add the rest when available when the set is built):

{_metadata_counts(by_config)}

## How the sets were made

Candidates were found by Flickr searches for each class's WordNet lemmas, restricted to photos
uploaded in the years after ImageNet's collection. Crowd workers on Mechanical Turk saw grids of
48 images for one class (with positive and negative control images from the ImageNet validation
set) and selected those that show the class; an image's selection frequency is the fraction of
submitted and approved assignments that selected it. Candidates with fewer than 10 annotations,
near-duplicates of ImageNet images or of each other, and images rejected in a final review were
excluded. Then:

- **MatchedFrequency** matched, per class, the histogram of selection frequencies of the class's
  original validation images (bins at 0.2, 0.4, 0.6, 0.8).
- **Threshold0.7** drew 10 random candidates per class with selection frequency ≥ 0.7.
- **TopImages** took the 10 candidates with the highest selection frequency.

Each set is the final revision of a chain of revisions; the revision files (`revisions/`) list
its 10,000 (candidate id, wnid) pairs and every sampling parameter.

## Source and integrity

Built from the archives of the Hub repository [`{HUB_REPO}`](https://huggingface.co/datasets/{HUB_REPO})
at commit `{HUB_COMMIT}`, after checking each archive's size and sha256 and that it holds
exactly the revision's images. The 2019 release of the archives named files `<class>/<k>.jpeg`
(k = 0 … 9); those names are not candidate ids, and this dataset is built from the current
release only.

## License and citation

The annotations and code are MIT-licensed ([repository]({HOMEPAGE})); the images are Flickr
photos under their uploaders' terms.

```bibtex
{CITATION.strip()}
```
"""


def revision_files(names=None) -> dict[str, bytes]:
    """The released revision files, as ``revisions/<config>.json`` for the Hub-ready folder."""
    from importlib import resources

    files = {}
    for v in VARIANTS:
        if names is None or v.config_name in names:
            data = resources.files("imagenetv2").joinpath(f"data/{v.revision_file}").read_bytes()
            files[f"revisions/{v.config_name}.json"] = data
    return files

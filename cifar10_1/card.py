"""The CIFAR-10.1 dataset card: YAML keys besides configs/dataset_info, and the prose.

The tables (rows, class counts, keywords) are computed from the exported datasets, so the card
describes what is in the folder, not what was meant to be.
"""

from __future__ import annotations

from importlib import resources
from typing import Mapping, Sequence

import datasets
import numpy as np

from .variants import CLASS_NAMES, DEFAULT_CONFIG, GITHUB_COMMIT, GITHUB_REPO, VARIANTS, get_variant

CITATION_FILE = "CITATIONS.bib"


def citations() -> str:
    """The BibTeX entries to cite (CIFAR-10.1, the ImageNetV2 paper, Tiny Images).

    >>> citations().count("@")
    3
    """
    return resources.files("cifar10_1").joinpath(CITATION_FILE).read_text("utf-8")


def card_extra() -> dict:
    """The card's YAML keys besides ``configs`` and ``dataset_info``."""
    return {
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


def class_counts(dataset: datasets.Dataset) -> list[int]:
    """Images per class, in CIFAR-10's class order."""
    labels = np.asarray(dataset.data.column("label").to_numpy(), dtype=np.int64)
    return np.bincount(labels, minlength=len(CLASS_NAMES)).tolist()


def configs_table(exports: Mapping[str, datasets.Dataset]) -> str:
    header = "| config | images | " + " | ".join(CLASS_NAMES) + " | keywords | description |"
    rule = "|" + "---|" * (len(CLASS_NAMES) + 4)
    lines = [header, rule]
    for name, ds in exports.items():
        counts = " | ".join(str(n) for n in class_counts(ds))
        keywords = len(set(ds.data.column("keyword").to_pylist()))
        default = " (default)" if name == DEFAULT_CONFIG else ""
        lines.append(f"| `{name}`{default} | {ds.num_rows:,} | {counts} | {keywords} | {get_variant(name).description} |")
    return "\n".join(lines)


def _shared_images(exports: Mapping[str, datasets.Dataset]) -> str:
    if not {"v4", "v6"} <= set(exports):
        return ""
    v4, v6 = (set(exports[v].data.column("ti_index").to_pylist()) for v in ("v4", "v6"))
    return f" The two versions share {len(v4 & v6):,} Tiny Images indices."


def card_body(exports: Mapping[str, datasets.Dataset]) -> str:
    """The card's prose for the exported configs ``{name: dataset}``."""
    names = [v.config_name for v in VARIANTS if v.config_name in exports]
    return f"""
# CIFAR-10.1

CIFAR-10.1 is a new test set for CIFAR-10, built by Recht, Roelofs, Schmidt and Shankar to ask
whether CIFAR-10 classifiers generalize to truly unseen images drawn the way CIFAR-10 was drawn
([Do CIFAR-10 Classifiers Generalize to CIFAR-10?](https://arxiv.org/abs/1806.00451), 2018; the
method was then carried over to ImageNet in *Do ImageNet Classifiers Generalize to ImageNet?*,
ICML 2019). A broad range of models lose 4 to 10 percentage points of accuracy on it.

This copy stores every image losslessly (PNG: decoding gives back the released `uint8` array byte
for byte) and adds each image's provenance: its position in the released array, its Tiny Images
index and the Tiny Images keyword it was found under. It was built from the files of
[{GITHUB_REPO}](https://github.com/{GITHUB_REPO}) at commit `{GITHUB_COMMIT}`, checked against
pinned sizes and sha256.

## Configs

{configs_table({n: exports[n] for n in names})}

Class counts are in CIFAR-10's class order.{_shared_images(exports)}

- **`v6`** (default) is the recommended version: 2,000 images, exactly 200 per class, sorted by
  class. It corresponds to Appendix D of the 2018 paper.
- **`v4`** is the version of the paper's main results: 2,021 images. It was sampled keyword by
  keyword to match the keyword distribution of CIFAR-10, which left the classes imbalanced:
  218 dogs but only 161 ships (8% of the set instead of 10%). Per-class accuracies therefore
  weigh differently than on CIFAR-10's balanced test set; compare with the paper's v4 numbers
  only on `v4`, and prefer `v6` for new work. Its images are ordered by keyword, not by class.

## Loading

```python
from datasets import load_dataset

v6 = load_dataset(REPO, split="test")             # the default config, v6
v4 = load_dataset(REPO, "v4", split="test")       # the paper's main results
row = v6[0]
row["image"]                                      # PIL.Image, 32x32 RGB
v6.features["label"].int2str(row["label"])        # 'airplane'
```

`REPO` is this dataset's id on the Hub, or the folder it was exported to. To get the images as
the released array: `np.stack([np.asarray(im) for im in v6["image"]])`.

### Scoring a model trained on the Hub's CIFAR-10

The `label` column has CIFAR-10's ten names in CIFAR-10's order ({", ".join(CLASS_NAMES)}),
the same `ClassLabel` as the Hub's CIFAR-10 (`uoft-cs/cifar10`), so a model trained there is
scored without remapping labels. The only difference is the image column's name: `uoft-cs/cifar10`
calls it `img`, this dataset `image`. Rename it if your preprocessing expects `img`:

```python
cifar10 = load_dataset("uoft-cs/cifar10", split="test")
new = load_dataset(REPO, "v6", split="test")
assert new.features["label"].names == cifar10.features["label"].names
new = new.rename_column("image", "img")           # now the same columns as uoft-cs/cifar10
```

## Fields

| field | type | meaning |
|---|---|---|
| `image` | Image (PNG) | the 32×32 RGB image, lossless |
| `label` | ClassLabel | the class, 0-9 in CIFAR-10's order |
| `index` | int32 | position in the released array (`cifar10.1_<version>_data.npy`) |
| `ti_index` | int64 | index of the image in the 80 Million Tiny Images dataset |
| `keyword` | string | the Tiny Images search keyword the image was found under |

The keywords come from the release's metadata: for `v4`, the per-keyword index lists reproduce
the array order; for `v6`, each index is found under its keyword in the labelled pool, and the
keyword `cruiser`, used for both automobiles and ships, is separated with the release's
`cruiser_good_indices.json`. The per-class keyword counts derived this way equal the release's
`keyword_counts_v6.json` exactly.

## How the set was made

CIFAR-10 is a labelled subset of the 80 Million Tiny Images dataset (Torralba, Fergus and
Freeman, 2008), whose 32×32 images were collected by searching image engines for WordNet nouns,
the *keywords*. CIFAR-10.1 repeats that process: the authors determined the Tiny Images keywords
of the CIFAR-10 images and how often each occurs, drew new candidate images from Tiny Images
for the same keywords in matching proportions, labelled them themselves (a second person
double-checked every label), and removed near-duplicates of CIFAR-10 images. The new images
are as close to CIFAR-10's distribution as the authors could make them, yet models score
markedly lower on them.

## Provenance: Tiny Images was withdrawn

In June 2020 the creators of 80 Million Tiny Images withdrew it and asked that it no longer be
used, after it was shown to contain offensive categories and images (its keywords were taken
from WordNet without filtering). CIFAR-10.1, like CIFAR-10, was drawn from it and inherits this
provenance: the images here are restricted to the ten CIFAR-10 classes and were inspected by
the authors, but they come from a dataset its creators have retracted. The
`ti_index` and `keyword` columns are kept so that this provenance stays traceable.

## License

The code and metadata of the CIFAR-10.1 repository are released under the MIT license. That
repository states that the license does not cover the image and label data, which are part of
Tiny Images and can be used the same way as Tiny Images.

## Citation

Please cite the CIFAR-10.1 paper and Tiny Images (the CIFAR-10.1 authors ask for both), and the
ICML 2019 paper if you also use ImageNetV2:

```bibtex
{citations().strip()}
```
"""

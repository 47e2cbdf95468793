"""The columns of a CIFAR-10.1 row."""

from __future__ import annotations

import datasets

from .variants import CLASS_NAMES


def cifar10_1_features() -> datasets.Features:
    """Features of both CIFAR-10.1 configs.

    ``label`` has CIFAR-10's names in CIFAR-10's order, the label space of the Hub's CIFAR-10.

    >>> cifar10_1_features()["label"].int2str(8)
    'ship'
    """
    return datasets.Features(
        {
            "image": datasets.Image(),  # PNG: decodes to the released array byte for byte
            "label": datasets.ClassLabel(names=list(CLASS_NAMES)),
            "index": datasets.Value("int32"),  # position in the released array
            "ti_index": datasets.Value("int64"),  # index in the 80 Million Tiny Images
            "keyword": datasets.Value("string"),  # the Tiny Images keyword the image was found under
        }
    )

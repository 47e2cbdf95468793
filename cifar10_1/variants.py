"""The two CIFAR-10.1 versions, declared once.

Every fact about a version (config name, released files with their sizes and sha256, the pinned
URL, the number of images and the class counts) lives in :data:`VARIANTS`; the builder, the
card and the tests read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pipeline.core.integrity import FileChecksum

GITHUB_REPO = "modestyachts/CIFAR-10.1"
GITHUB_COMMIT = "d9982abb0bfc4846b8d13a11e66b887d946205d0"  # 2020-04-15, "Update to numpy format version 2.0"
# The folder the released files are served from; tests point it at a local server.
RAW_BASE_URL = f"https://github.com/{GITHUB_REPO}/raw/{GITHUB_COMMIT}/datasets"

CLASS_NAMES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)  # CIFAR-10's order, so labels mean what they mean on the Hub's CIFAR-10
IMAGE_SHAPE = (32, 32, 3)


@dataclass(frozen=True)
class Variant:
    """One CIFAR-10.1 version as released."""

    config_name: str  # "v4", "v6": also the version in the released file names
    images: FileChecksum  # cifar10.1_<v>_data.npy, (N, 32, 32, 3) uint8
    labels: FileChecksum  # cifar10.1_<v>_labels.npy, (N,) int
    num_examples: int
    class_counts: tuple[int, ...]  # images per class, in CLASS_NAMES order
    description: str

    @property
    def files(self) -> Mapping[str, FileChecksum]:
        """The released files by role (``images``, ``labels``)."""
        return {"images": self.images, "labels": self.labels}

    def url(self, file: FileChecksum) -> str:
        """Where ``file`` is served at the pinned commit (read at call time, so it can be redirected)."""
        return f"{RAW_BASE_URL}/{file.name}"


VARIANTS: tuple[Variant, ...] = (
    Variant(
        config_name="v6",
        images=FileChecksum(
            "cifar10.1_v6_data.npy", 6144128, "2997188e5816f5bd545dc77771b6227828c28146049fcecf3fa10775474cacc6"
        ),
        labels=FileChecksum(
            "cifar10.1_v6_labels.npy", 8128, "ae40beda001693674edc94d925ee8268cfe68905f8f9aff800c8dcdfcd6c9448"
        ),
        num_examples=2000,
        class_counts=(200,) * 10,
        description=(
            "The recommended version: 2,000 images, exactly 200 per class, sorted by class "
            "(Appendix D of Recht et al. 2018)."
        ),
    ),
    Variant(
        config_name="v4",
        images=FileChecksum(
            "cifar10.1_v4_data.npy", 6208640, "5aaedc268df8f4cffca2ac0cf9e608ae1897a8cddb630c7a850a2ea8f6558e75"
        ),
        labels=FileChecksum(
            "cifar10.1_v4_labels.npy", 8212, "1f9544300ded199539b6662364ce7fe6c2e1ea9f87408f06db4b1a6184cffb18"
        ),
        num_examples=2021,
        class_counts=(208, 212, 202, 212, 204, 218, 192, 210, 161, 202),
        description=(
            "The version of the paper's main results: 2,021 images, not class-balanced "
            "(161 ships, 8%), ordered by Tiny Images keyword."
        ),
    ),
)

DEFAULT_CONFIG = "v6"
CONFIG_NAMES: tuple[str, ...] = tuple(v.config_name for v in VARIANTS)
_BY_NAME = {v.config_name: v for v in VARIANTS}


def get_variant(name: str) -> Variant:
    """The version called ``name`` (``"v6"`` or ``"v4"``); other spellings are refused with the right name.

    >>> get_variant("v4").num_examples
    2021
    >>> get_variant("cifar10.1_v6")
    Traceback (most recent call last):
    ...
    ValueError: unknown CIFAR-10.1 config 'cifar10.1_v6': did you mean 'v6'? The configs are 'v6', 'v4'.
    """
    if name in _BY_NAME:
        return _BY_NAME[name]
    key = str(name).lower().strip()
    for prefix in ("cifar10.1_", "cifar10_1_", "cifar10.1-", "cifar-10.1-", "cifar10_1/", "cifar10.1/"):
        key = key.removeprefix(prefix)
    if key.isdigit():
        key = f"v{key}"
    guess = key if key in _BY_NAME else None
    if key in ("default", "v0"):  # the first release's names for v6 and v4
        guess = {"default": "v6", "v0": "v4"}[key]
    known = ", ".join(repr(n) for n in CONFIG_NAMES)
    hint = f": did you mean {guess!r}?" if guess else ":"
    raise ValueError(f"unknown CIFAR-10.1 config {name!r}{hint} The configs are {known}.")

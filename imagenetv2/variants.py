"""The three ImageNetV2 test sets, declared once.

Every fact about a set (config name, its sampling rule and the rule's function name in revision
files, archive, pinned URL, size, sha256, the folder inside the archive, the revision list, the
2019 release it replaced) lives in :data:`VARIANTS`; the builder, the card, the checksums, the
rebuild pipeline (revisions, the ``sample`` command, the demo) and the tests all read it from here.

>>> [(v.config_name, v.sampling_rule, v.sampling_function) for v in VARIANTS][0]
('matched-frequency', 'MatchedFrequency', 'sample_wnid_histogram')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pipeline.core.integrity import FileChecksum, KnownRelease

HUB_REPO = "vaishaal/ImageNetV2"
HUB_COMMIT = "d626240be2538720e83103a0e1178d24aca8b12c"  # "Upload 3 files", 2023-03-19
HUB_URL = "https://huggingface.co/datasets/{repo}/resolve/{commit}/{archive}"

IMAGES_PER_CLASS = 10
NUM_CLASSES = 1000


@dataclass(frozen=True)
class Variant:
    """One ImageNetV2 test set as released."""

    config_name: str  # ours, e.g. "matched-frequency"
    sampling_rule: str  # the paper's name, e.g. "MatchedFrequency"
    sampling_function: str  # the rule's name in revision files ("sampling_function"), e.g. "sample_wnid_histogram"
    archive: FileChecksum  # the archive on the Hub: name, size, sha256
    top_folder: str  # the single folder inside the archive (older copies spell it differently)
    revision: str  # the released revision list, e.g. "imagenetv2-b-33"
    legacy_archive: FileChecksum  # the 2019 release, whose file names are not candidate ids
    description: str
    method: str  # how the rule drew the set, a sentence for the card

    @property
    def url(self) -> str:
        return HUB_URL.format(repo=HUB_REPO, commit=HUB_COMMIT, archive=self.archive.name)

    @property
    def revision_file(self) -> str:
        return f"{self.revision}.json"

    def known_releases(self) -> Mapping[str, KnownRelease]:
        """Checksums of other releases of this archive, with what to say when one is found."""
        message = (
            f"this is the 2019 release of ImageNetV2 {self.sampling_rule} (sha256 "
            f"{self.legacy_archive.sha256}). Its files are named <class>/<k>.jpeg with k = 0..9: "
            f"those names are not candidate ids, and no mapping to candidate ids was ever published. "
            f"Download the current release instead: {self.url} (sha256 {self.archive.sha256})."
        )
        return {self.legacy_archive.sha256: KnownRelease(self.legacy_archive, message)}


VARIANTS: tuple[Variant, ...] = (
    Variant(
        config_name="matched-frequency",
        sampling_rule="MatchedFrequency",
        sampling_function="sample_wnid_histogram",
        archive=FileChecksum(
            "imagenetv2-matched-frequency.tar.gz",
            1264079360,
            "f0c37fdf925916b19ea1323cd9a2208cdb6959ba2c32eef2a7fc393835c9ca7c",
        ),
        top_folder="imagenetv2-matched-frequency-format-val",
        revision="imagenetv2-b-33",
        legacy_archive=FileChecksum(
            "imagenetv2-matched-frequency.tar.gz",
            1253959680,
            "a32004f9e773279307499059d320336a23ccdc62cb32063da29bae9bd04c122c",
        ),
        description=(
            "For each class, the distribution of selection frequencies matches that of the class's "
            "original validation images (bins 0-0.2, 0.2-0.4, 0.4-0.6, 0.6-0.8, 0.8-1.0). The set the "
            "paper's main results use."
        ),
        method=(
            "matched, per class, the histogram of selection frequencies of the class's original "
            "validation images (bins at 0.2, 0.4, 0.6, 0.8)."
        ),
    ),
    Variant(
        config_name="threshold-0.7",
        sampling_rule="Threshold0.7",
        sampling_function="sample_above_threshold",
        archive=FileChecksum(
            "imagenetv2-threshold0.7.tar.gz",
            1249906176,
            "32142bfe998f9cfa4141be691f6a80eeb1e27b24bd532a668eb08c26d98897a2",
        ),
        top_folder="imagenetv2-threshold0.7-format-val",
        revision="imagenetv2-a-44",
        legacy_archive=FileChecksum(
            "imagenetv2-threshold0.7.tar.gz",
            605399040,
            "bf2e2d9b625ae29c6e44982928f36220af62359b74602a995518a06840d0d76e",
        ),
        description=(
            "Ten random candidates per class among those with selection frequency of at least 0.7 "
            "(0.6 for n03014705 and n02090379, 0.5 for n03804744)."
        ),
        method="drew 10 random candidates per class with selection frequency ≥ 0.7.",
    ),
    Variant(
        config_name="top-images",
        sampling_rule="TopImages",
        sampling_function="sample_best",
        archive=FileChecksum(
            "imagenetv2-top-images.tar.gz",
            1245927936,
            "85e4ace30f3f0d660152062254b8759dda66267b27f7ec0fd8d5768f1073a04b",
        ),
        top_folder="imagenetv2-top-images-format-val",
        revision="imagenetv2-c-12",
        legacy_archive=FileChecksum(
            "imagenetv2-topimages.tar.gz",
            606351360,
            "1ced1ef684934a84af854658bc8ff9adbbec553631e6eef3535ef816c3d3b98f",
        ),
        description="The ten candidates per class with the highest selection frequency.",
        method="took the 10 candidates with the highest selection frequency.",
    ),
)

DEFAULT_CONFIG = "matched-frequency"
CONFIG_NAMES: tuple[str, ...] = tuple(v.config_name for v in VARIANTS)
_BY_NAME = {v.config_name: v for v in VARIANTS}
# config name -> the rule's function name in revision files, and back
SAMPLING_FUNCTIONS: Mapping[str, str] = {v.config_name: v.sampling_function for v in VARIANTS}
CONFIG_OF_FUNCTION: Mapping[str, str] = {v.sampling_function: v.config_name for v in VARIANTS}

# Spellings seen in the wild (the archives, TFDS, other loaders) and the config they mean.
ALIASES: Mapping[str, str] = {
    "matchedfrequency": "matched-frequency",
    "matched_frequency": "matched-frequency",
    "matched-frequency-format-val": "matched-frequency",
    "threshold0.7": "threshold-0.7",
    "threshold_0.7": "threshold-0.7",
    "threshold-07": "threshold-0.7",
    "threshold07": "threshold-0.7",
    "threshold_07": "threshold-0.7",
    "threshold-0.7-format-val": "threshold-0.7",
    "topimages": "top-images",
    "top_images": "top-images",
    "top-images-format-val": "top-images",
}


def get_variant(name: str) -> Variant:
    """The variant called ``name``; other spellings are refused with the right name.

    >>> get_variant("top-images").revision
    'imagenetv2-c-12'
    >>> get_variant("topimages")
    Traceback (most recent call last):
    ...
    ValueError: unknown ImageNetV2 config 'topimages': did you mean 'top-images'? The configs are 'matched-frequency', 'threshold-0.7', 'top-images'.
    """
    if name in _BY_NAME:
        return _BY_NAME[name]
    key = name.lower().strip()
    for prefix in ("imagenetv2-", "imagenet_v2/", "imagenet-v2-", "imagenetv2_"):
        key = key.removeprefix(prefix)
    guess = _BY_NAME.get(key) and key or ALIASES.get(key)
    known = ", ".join(repr(n) for n in CONFIG_NAMES)
    hint = f": did you mean {guess!r}?" if guess else ":"
    raise ValueError(f"unknown ImageNetV2 config {name!r}{hint} The configs are {known}.")

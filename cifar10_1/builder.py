"""The CIFAR-10.1 dataset builder: ``Cifar10_1(config_name="v6" | "v4", data_dir=None)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import datasets
from datasets.builder import Key

from pipeline.core.builders import ClearErrors, Verification, file_stats
from pipeline.core.integrity import ChecksumError, FileChecksum

from .features import cifar10_1_features
from .release import Release, expected_checksums, locate_files, read_release, verify_files
from .variants import DEFAULT_CONFIG, VARIANTS, get_variant

HOMEPAGE = "https://github.com/modestyachts/CIFAR-10.1"
VERSION = datasets.Version("1.0.0")  # of this builder's output; the data versions are the configs


@dataclass
class Cifar10_1Config(datasets.BuilderConfig):
    """A CIFAR-10.1 version; ``checksums`` (file name → FileChecksum) replaces pinned checksums."""

    checksums: Optional[Mapping[str, FileChecksum]] = None


class Cifar10_1(ClearErrors, datasets.ArrowBasedBuilder):
    """CIFAR-10.1, a new test set for CIFAR-10 (Recht et al. 2018), lossless, with each image's provenance.

    The released files are downloaded from the pinned commit of the CIFAR-10.1 repository, or read
    from ``data_dir`` under their released names; their sizes and sha256 are checked in both
    cases unless ``verification_mode="no_checks"``. What was verified is recorded in the
    ``DatasetInfo`` description and in the cache (a verified build never reuses an unverified one).

    Example (``data_dir`` holding ``cifar10.1_v4_data.npy`` and ``cifar10.1_v4_labels.npy``)::

        builder = Cifar10_1(config_name="v4", data_dir="cifar10.1")
        builder.download_and_prepare()
        ds = builder.as_dataset(split="test")   # 2,021 rows: image, label, index, ti_index, keyword
    """

    VERSION = VERSION
    BUILDER_CONFIG_CLASS = Cifar10_1Config
    BUILDER_CONFIGS = [Cifar10_1Config(name=v.config_name, version=VERSION, description=v.description) for v in VARIANTS]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

    def __init__(self, *args, config_name: Optional[str] = None, **kwargs):
        if config_name is not None:
            get_variant(config_name)  # a clear error for an unknown or misspelt config
        kwargs.setdefault("dataset_name", "cifar10_1")
        super().__init__(*args, config_name=config_name, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        variant = get_variant(self.config.name)
        return datasets.DatasetInfo(
            description=variant.description,
            features=cifar10_1_features(),
            homepage=HOMEPAGE,
            license="MIT (code and metadata); the images are part of the withdrawn 80 Million Tiny Images",
            splits=datasets.SplitDict({"test": datasets.SplitInfo(name="test", num_examples=variant.num_examples)}),
        )

    def _split_generators(self, dl_manager):
        variant = get_variant(self.config.name)
        expected = expected_checksums(variant, self.config.checksums)
        paths = locate_files(variant, self.config.data_dir) if self.config.data_dir else self._download(dl_manager, variant)
        if self.verify:
            try:
                verify_files(paths, expected)
            except ChecksumError as e:
                if self.config.data_dir:
                    raise
                urls = ", ".join(variant.url(f) for f in variant.files.values())
                raise ChecksumError(f"{e} (Downloaded from {urls}; download_mode='force_redownload' fetches them again.)") from None
        self.verification = verification(variant, expected, paths, self.verify)
        self.info.description = f"{variant.description}\n\nVerified: {self.verification.statement}."
        release = read_release(variant, paths)
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"release": release})]

    def _download(self, dl_manager, variant) -> dict:
        urls = {role: variant.url(f) for role, f in variant.files.items()}
        try:
            return dl_manager.download(urls)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - network errors come in many types
            names = " and ".join(f.name for f in variant.files.values())
            detail = str(e).splitlines()[0] if str(e) else "no details"
            raise self.download_failed(
                e,
                f"could not download the CIFAR-10.1 {variant.config_name} files {names} from "
                f"{variant.url(variant.images).rsplit('/', 1)[0]}/ ({type(e).__name__}: {detail}); download them yourself and build "
                f"from their folder with --data-dir FOLDER (data_dir=FOLDER)"
            ) from None

    def _generate_tables(self, release: Release):
        for i, table in enumerate(release.tables(self.info.features.arrow_schema)):
            yield Key(0, i), table


def verification(variant, expected: Mapping[str, FileChecksum], paths: Mapping, verified: bool) -> Verification:
    """What the build verified about ``variant``'s files, for the card and the cache."""
    names = ", ".join(f.name for f in variant.files.values())
    if not verified:
        return Verification(
            False,
            "checksums not verified: built with verification_mode='no_checks' (--no-verify); "
            "the arrays' shapes, dtypes and labels checked",
        )
    pinned = all(expected[role] == f for role, f in variant.files.items())
    whose = "the pinned release's" if pinned else "the checksums given to the builder (not the pinned release's)"
    shown = ", ".join(f"{c.name} {c.sha256}" for c in expected.values())
    return Verification(
        True,
        f"{names} matched {whose} sizes and sha256 ({shown}); the arrays' shapes, dtypes and labels checked",
        file_stats(*paths.values()),
    )

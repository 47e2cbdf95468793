"""The ImageNetV2 dataset builder.

>>> from imagenetv2 import ImageNetV2
>>> builder = ImageNetV2(config_name="matched-frequency")   # doctest: +SKIP
>>> builder.download_and_prepare()                          # doctest: +SKIP
>>> test = builder.as_dataset(split="test")                 # doctest: +SKIP

An Arrow-based builder: the archive is read once, as a stream (:mod:`imagenetv2.reading`), and
its rows come out as Arrow tables of a bounded size, with the archive's sha256 computed on the
way, every member checked against the release layout and the revision list, and the original
JPEG bytes as the ``image`` column. Any problem raises an error that names it (and ``datasets``
removes the half-written cache folder). What was verified is recorded in the ``DatasetInfo``
description and in the cache (a verified build never reuses an unverified cache).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

import datasets
from datasets.builder import Key

from pipeline.core.builders import ClearErrors
from pipeline.core.integrity import FileChecksum

from .card import CITATION, HOMEPAGE
from .classes import wnids
from .features import imagenetv2_features
from .metadata import candidate_records, download_search_result_files, local_search_result_files
from .reading import ContentCheck, SetSource, archive_download_error, locate_source, read_tables
from .revisions import expected_images, load_revision_json, revision_name
from .rows import RowBatch
from .variants import DEFAULT_CONFIG, VARIANTS, Variant, get_variant

logger = logging.getLogger(__name__)

VERSION = datasets.Version("1.0.0")


@dataclass
class ImageNetV2Config(datasets.BuilderConfig):
    """A config of :class:`ImageNetV2`.

    ``revision_file`` (a revision JSON) and ``archive_checksum`` (a
    :class:`~pipeline.core.integrity.FileChecksum`) replace the released revision list and the pinned
    archive checksum, for sets rebuilt by the pipeline.
    """

    variant: Optional[Variant] = None
    revision_file: Optional[str] = None
    archive_checksum: Optional[FileChecksum] = None


class ImageNetV2(ClearErrors, datasets.ArrowBasedBuilder):
    """ImageNetV2: three new test sets for ImageNet, 10,000 images each (Recht et al., 2019)."""

    VERSION = VERSION
    BUILDER_CONFIG_CLASS = ImageNetV2Config
    BUILDER_CONFIGS = [
        ImageNetV2Config(name=v.config_name, version=VERSION, description=v.description, variant=v) for v in VARIANTS
    ]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

    def __init__(self, *args, config_name: Optional[str] = None, dataset_name: str = "imagenetv2", **kwargs):
        if config_name is not None:
            get_variant(config_name)  # a misspelt config gets an error naming the right one
        if kwargs.get("revision_file") is not None:
            kwargs["revision_file"] = os.fspath(kwargs["revision_file"])
        super().__init__(*args, config_name=config_name, dataset_name=dataset_name, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=self.config.description or "",
            features=imagenetv2_features(),
            homepage=HOMEPAGE,
            citation=CITATION,
            license="MIT",
        )

    def _split_generators(self, dl_manager) -> list[datasets.SplitGenerator]:
        variant = self.config.variant
        revision = load_revision_json(self.config.revision_file or variant.revision)
        checksum = self.config.archive_checksum or variant.archive
        if self.config.data_dir:
            kind, path = locate_source(Path(self.config.data_dir), variant, checksum)
            search_files = local_search_result_files(self.config.data_dir)
        else:
            kind, path = "archive", self._download_archive(dl_manager, variant)
            search_files = download_search_result_files(dl_manager)
        source = SetSource(kind, str(path), checksum, pinned=checksum == variant.archive, verify=self.verify and kind == "archive")
        self.verification = source.verification(revision_name(revision, self.config.name))
        self.info.description = f"{self.config.description or ''}\n\nVerified: {self.verification.statement}."
        gen_kwargs = {"source": source, "revision": revision, "search_files": tuple(map(str, search_files))}
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs=gen_kwargs)]

    def _download_archive(self, dl_manager, variant: Variant) -> str:
        try:
            return dl_manager.download(variant.url)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - network errors come in many types
            raise self.download_failed(e, archive_download_error(variant, e)) from None

    def _generate_tables(self, source: SetSource, revision: Mapping, search_files: tuple[str, ...]) -> Iterator:
        expected = expected_images(revision)
        content = ContentCheck(expected, source.path, revision_name(revision, self.config.name))
        all_wnids = wnids()
        records = candidate_records({cid: all_wnids[c] for cid, c in expected.items()}, search_files)
        rows = RowBatch(self.info.features.arrow_schema, all_wnids, records)
        known = self.config.variant.known_releases()
        tables = read_tables(source, content, rows, known, num_proc=self.num_proc)
        for i, table in enumerate(tables):
            yield Key(0, i), table

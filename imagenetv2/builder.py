"""The ImageNetV2 dataset builder.

>>> from imagenetv2 import ImageNetV2
>>> builder = ImageNetV2(config_name="matched-frequency")   # doctest: +SKIP
>>> builder.download_and_prepare()                          # doctest: +SKIP
>>> test = builder.as_dataset(split="test")                 # doctest: +SKIP

The archive is read once, as a stream: its sha256 is computed on the way, every member is
checked against the release layout and the revision list, and the original JPEG bytes become the
``image`` column unchanged. Any problem raises an error that names it (and ``datasets`` removes
the half-written cache folder).
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

import datasets
from PIL import Image

from pipeline.core.builders import ClearErrors
from pipeline.core.integrity import FileChecksum, PrefetchingHashingReader, check_checksum, file_digest

from .archive import ArchiveError, Member, find_top_folder, iter_folder, iter_tar
from .classes import wnids
from .features import imagenetv2_features
from .metadata import candidate_records, download_search_result_files, local_search_result_files, metadata_row
from .revisions import expected_images, load_revision_json, revision_name
from .variants import DEFAULT_CONFIG, VARIANTS, Variant, get_variant

logger = logging.getLogger(__name__)

VERSION = datasets.Version("1.0.0")
HOMEPAGE = "https://github.com/modestyachts/ImageNetV2"
CITATION = """\
@inproceedings{recht2019imagenet,
  title     = {Do ImageNet Classifiers Generalize to ImageNet?},
  author    = {Recht, Benjamin and Roelofs, Rebecca and Schmidt, Ludwig and Shankar, Vaishaal},
  booktitle = {Proceedings of the 36th International Conference on Machine Learning},
  pages     = {5389--5400},
  year      = {2019},
}
"""


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


class ImageNetV2(ClearErrors, datasets.GeneratorBasedBuilder):
    """ImageNetV2: three new test sets for ImageNet, 10,000 images each (Recht et al., 2019)."""

    VERSION = VERSION
    BUILDER_CONFIG_CLASS = ImageNetV2Config
    BUILDER_CONFIGS = [
        ImageNetV2Config(name=v.config_name, version=VERSION, description=v.description, variant=v) for v in VARIANTS
    ]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG
    CLEAR_ERRORS = (ValueError, FileNotFoundError)

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
            kind, path = "archive", dl_manager.download(variant.url)
            search_files = download_search_result_files(dl_manager)
        return [
            datasets.SplitGenerator(
                name=datasets.Split.TEST,
                gen_kwargs={
                    "kind": kind,
                    "path": str(path),
                    "revision": revision,
                    "checksum": checksum,
                    "search_files": tuple(map(str, search_files)),
                },
            )
        ]

    def _generate_examples(
        self, kind: str, path: str, revision: Mapping, checksum: FileChecksum, search_files: tuple[str, ...]
    ) -> Iterator[tuple[str, dict]]:
        expected = expected_images(revision)
        content = ContentCheck(expected, path, revision_name(revision, self.config.name))
        all_wnids = wnids()
        records = candidate_records({cid: all_wnids[c] for cid, c in expected.items()}, search_files)
        if kind == "folder":
            logger.warning(
                "%s is an extracted folder: its images are checked against the revision list, but the "
                "archive's sha256 cannot be verified",
                path,
            )
            yield from self._examples(iter_folder(Path(path)), content, records, path, full_decode=True)
            content.finish()
            return
        known = self.config.variant.known_releases()
        if self.verify and os.path.getsize(path) != checksum.size:  # fail fast, before reading the tar
            check_checksum(path, file_digest(path), checksum, known)
        with PrefetchingHashingReader(open(path, "rb", buffering=0)) as reader:
            pinned = self.verify and checksum == self.config.variant.archive
            yield from self._examples(iter_tar(reader, path), content, records, path, full_decode=not pinned)
            digest = reader.drain()
        if self.verify:
            check_checksum(path, digest, checksum, known)
        content.finish()

    def _examples(self, members: Iterator[Member], content: "ContentCheck", records: Mapping, source: str, full_decode: bool):
        all_wnids = wnids()
        for member in members:
            content.add(member)
            check_image(member, source, full_decode)
            yield member.path, {
                # no path: datasets would store a path that happens to name a local file instead of the bytes
                "image": {"bytes": member.data, "path": None},
                "label": member.class_index,
                "wnid": all_wnids[member.class_index],
                "candidate_id": member.candidate_id,
                **metadata_row(records.get(member.candidate_id)),
            }


class ContentCheck:
    """Checks that the images found are exactly the revision's (candidate id, class) pairs."""

    def __init__(self, expected: Mapping[str, int], source: str, revision: str):
        self.expected = expected
        self.source = source
        self.revision = revision
        self.seen: set[str] = set()

    def add(self, member: Member) -> None:
        cid = member.candidate_id
        if cid not in self.expected:
            raise ArchiveError(
                f"{self.source}: unexpected image {member.path}: candidate id {cid} is not in revision "
                f"{self.revision}. Is this the right archive for this config?"
            )
        if cid in self.seen:
            raise ArchiveError(f"{self.source}: image {cid} appears twice (again at {member.path})")
        if self.expected[cid] != member.class_index:
            raise ArchiveError(
                f"{self.source}: image {member.path} is in class folder {member.class_index}, but revision "
                f"{self.revision} puts candidate {cid} in class {self.expected[cid]}"
            )
        self.seen.add(cid)

    def finish(self) -> None:
        missing = sorted(set(self.expected) - self.seen, key=lambda c: (self.expected[c], c))
        if missing:
            shown = ", ".join(f"{self.expected[c]}/{c}.jpeg" for c in missing[:5])
            raise ArchiveError(
                f"{self.source}: {len(missing)} of the {len(self.expected)} images of revision {self.revision} "
                f"are missing (e.g. {shown}). The archive is incomplete or belongs to another config."
            )


def check_image(member: Member, source: str, full_decode: bool) -> None:
    """Check that an archive member is a complete JPEG; a broken file is an error naming its path.

    Always: the data starts with the JPEG start-of-image marker and ends with the end-of-image
    marker (which catches truncated and garbage files). With ``full_decode``, or when that check
    fails: the image is decoded at 1/8 scale, which reads every entropy-coded scan. The builder
    decodes fully whenever the bytes are not covered by a pinned checksum of the release
    (``no_checks``, an extracted folder, a rebuilt set), since a matching sha256 already proves
    the bytes are the released ones.
    """
    data = member.data
    if not full_decode:
        if data[:3] == b"\xff\xd8\xff" and (data.endswith(b"\xff\xd9") or data.rstrip(b"\x00").endswith(b"\xff\xd9")):
            return
        full_decode = True  # not a complete JPEG: let the decoder say what is wrong
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft("RGB", (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except Exception as e:
        raise ArchiveError(f"{source}: {member.path} does not decode as an image ({type(e).__name__}: {e})") from e


def locate_source(data_dir: Path, variant: Variant, checksum: FileChecksum) -> tuple[str, Path]:
    """Find the archive (as named on the Hub) or its extracted top folder in ``data_dir``."""
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data_dir {data_dir} is not a folder")
    for name in dict.fromkeys((checksum.name, variant.archive.name, variant.legacy_archive.name)):
        if (data_dir / name).is_file():
            return "archive", data_dir / name
    try:
        return "folder", find_top_folder(data_dir, variant.config_name.replace("-", "").replace(".", ""))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no ImageNetV2 {variant.config_name} in {data_dir}: expected the archive {checksum.name} "
            f"(download it from {variant.url}) or its extracted folder {variant.top_folder}"
        ) from None

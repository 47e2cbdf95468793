"""One streaming pass over an ImageNetV2 archive (or extracted folder) that yields Arrow tables.

The archive is read once: its sha256 is computed on the way (by a prefetching thread), every
member is checked against the release layout and the revision list, every image is checked
as a JPEG (decoded on all cores when no pinned checksum covers the bytes), and the original
JPEG bytes become the ``image`` column unchanged. Any problem raises an error that names it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import pyarrow as pa

from pipeline.core.builders import Verification, file_stats
from pipeline.core.integrity import BackgroundDigest, FileChecksum, PrefetchingHashingReader, check_checksum, file_digest

from .archive import ArchiveError, Member, find_top_folder, is_plain_tar, iter_folder, iter_tar, iter_tar_map, mapped_file
from .images import ImageChecker
from .rows import RowBatch
from .variants import Variant

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SetSource:
    """Where a config's images come from and what will be verified about them."""

    kind: str  # "archive" or "folder"
    path: str
    checksum: FileChecksum  # the expected archive checksum (pinned or the rebuilt set's own)
    pinned: bool  # checksum is the release's pinned one
    verify: bool  # size and sha256 are checked (never for a folder)

    @property
    def full_decode(self) -> bool:
        """Every JPEG is decoded unless a pinned checksum proves the bytes are the released ones."""
        return not (self.kind == "archive" and self.verify and self.pinned)

    def verification(self, revision: str) -> Verification:
        """What a successful pass over this source will have verified (for the card and the cache)."""
        content = f"its images are exactly those of revision {revision}"
        decoded = "every JPEG decoded" if self.full_decode else "every JPEG's markers checked"
        name = Path(self.path).name
        if self.kind == "folder":
            return Verification(
                False,
                f"checksum not verified: built from the extracted folder {name}, which has no archive "
                f"checksum; {content}, {decoded}",
            )
        if not self.verify:
            return Verification(
                False, f"checksum not verified: built with verification_mode='no_checks' (--no-verify); {content}, {decoded}"
            )
        whose = "the pinned release's" if self.pinned else "the rebuilt set's own"
        return Verification(
            True,
            f"the archive {name} matched {whose} size and sha256 ({self.checksum.sha256}); {content}, {decoded}",
            file_stats(self.path),
        )


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


def read_tables(
    source: SetSource,
    content: ContentCheck,
    rows: RowBatch,
    known_releases: Mapping,
    num_proc: int = 1,
) -> Iterator[pa.Table]:
    """Yield the set's rows as tables; raise at the first problem, or at the end on a bad sha256."""
    checker = ImageChecker(source.path, source.full_decode, num_proc)  # forks before the reader thread
    with checker:
        if source.kind == "folder":
            logger.warning(
                "%s is an extracted folder: its images are checked against the revision list, but the "
                "archive's sha256 cannot be verified", source.path,
            )
            yield from _tables(iter_folder(Path(source.path)), content, checker, rows)
            checker.finish()
            content.finish()
            return
        path, expected = source.path, source.checksum
        if source.verify and os.path.getsize(path) != expected.size:  # fail fast, before reading the tar
            check_checksum(path, file_digest(path), expected, known_releases)
        if is_plain_tar(path):
            digest = yield from _plain_tar_tables(source, content, checker, rows)
        else:
            with PrefetchingHashingReader(open(path, "rb", buffering=0)) as reader:
                yield from _tables(iter_tar(reader, path), content, checker, rows)
                digest = reader.drain()
        if source.verify:
            check_checksum(path, digest, expected, known_releases)
        checker.finish()
        content.finish()


def _plain_tar_tables(source: SetSource, content: "ContentCheck", checker: ImageChecker, rows: RowBatch):
    """The tables of an uncompressed tar, hashed by a thread while it is read (returns the digest)."""
    hashing = BackgroundDigest(source.path) if source.verify else None
    try:
        with mapped_file(source.path) as mapped:
            yield from _tables(iter_tar_map(mapped, source.path), content, checker, rows)
    except BaseException:
        if hashing is not None:
            hashing.cancel()
        raise
    return hashing.result() if hashing is not None else None


def _tables(members: Iterator[Member], content: ContentCheck, checker: ImageChecker, rows: RowBatch):
    for member in members:
        content.add(member)
        checker.add(member.path, member.data)
        rows.add(member)
        if rows.full():
            yield rows.table()
    if len(rows):
        yield rows.table()


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


def archive_download_error(variant: Variant, error: BaseException) -> str:
    """One sentence: what could not be downloaded, from where, and how to build without it."""
    return (
        f"could not download the ImageNetV2 {variant.config_name} archive {variant.archive.name} from "
        f"{variant.url} ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no details'}); "
        f"download it yourself and build from its folder with --data-dir FOLDER (data_dir=FOLDER)"
    )

"""Reading an ImageNetV2 archive (or its extracted folder) in one streaming pass.

The layout is ``<top folder>/<class index>/<candidate id>.jpeg`` with class folders ``0`` …
``999`` (no zero padding) and 40-hex candidate ids. The archive is opened with transparent
compression detection (the ``.tar.gz`` archives are sometimes plain tars), read member by member
without extraction, and every member is checked before its bytes are used: no absolute paths, no
``..``, no links or devices, one top folder. OS junk (``._*``, ``.DS_Store``, ``__MACOSX``) is
skipped with a debug log.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import logging
import lzma
import mmap
import os
import re
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, NamedTuple

logger = logging.getLogger(__name__)

CANDIDATE_ID = re.compile(r"[0-9a-f]{40}")
CLASS_FOLDER = re.compile(r"0|[1-9][0-9]{0,2}")
LEGACY_FILE = re.compile(r"[0-9]\.jpe?g")
DRIVE = re.compile(r"[A-Za-z]:[\\/]")
JUNK_NAMES = {".DS_Store", "Thumbs.db", "desktop.ini"}
JUNK_FOLDERS = {"__MACOSX"}
TAR_BUFSIZE = 64 * 1024
DROP_BEHIND = 64 << 20  # bytes of a memory-mapped archive kept mapped behind the reader (one batch)


class ArchiveError(ValueError):
    """The archive or folder is not in the ImageNetV2 release layout."""


class LegacyReleaseError(ArchiveError):
    """The files are named like the 2019 release (``<class>/<k>.jpeg``): no candidate ids."""


class Member(NamedTuple):
    """One image of the set as found in the archive."""

    class_index: int
    candidate_id: str
    path: str  # "<class>/<candidate id>.jpeg", relative to the top folder
    data: bytes  # or a memoryview into the archive (iter_tar_map)


def is_junk(parts: tuple[str, ...]) -> bool:
    return any(p in JUNK_FOLDERS for p in parts) or parts[-1] in JUNK_NAMES or parts[-1].startswith("._")


def safe_parts(name: str, source: str) -> tuple[str, ...]:
    """Split a member name into parts, refusing absolute paths and ``..``."""
    if name.startswith("/") or "\\" in name or DRIVE.match(name):
        raise ArchiveError(f"{source}: refusing member {name!r}: absolute or non-POSIX path")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ArchiveError(f"{source}: refusing member {name!r}: it points outside the archive ('..')")
    return parts


def parse_image_path(rel: tuple[str, ...], source: str) -> tuple[int, str]:
    """``("17", "<id>.jpeg")`` → ``(17, "<id>")``, or an error that says what is wrong."""
    shown = "/".join(rel)
    if len(rel) != 2:
        raise ArchiveError(
            f"{source}: unexpected path {shown!r}: the layout is <top folder>/<class index>/<candidate id>.jpeg"
        )
    folder, filename = rel
    if not CLASS_FOLDER.fullmatch(folder) or int(folder) > 999:
        raise ArchiveError(
            f"{source}: class folder {folder!r} (in {shown!r}) is not an integer class index 0-999"
        )
    stem, dot, ext = filename.rpartition(".")
    if LEGACY_FILE.fullmatch(filename.lower()):
        raise LegacyReleaseError(
            f"{source}: {shown!r} is named like the 2019 release of ImageNetV2, whose file names "
            f"<class>/<k>.jpeg (k = 0..9) are not candidate ids; no mapping to candidate ids was "
            f"ever published. Download the current release (python -m imagenetv2 build without "
            f"--data-dir, or the archives of huggingface.co/datasets/vaishaal/ImageNetV2)."
        )
    if not dot or ext.lower() not in ("jpeg", "jpg") or not CANDIDATE_ID.fullmatch(stem):
        raise ArchiveError(
            f"{source}: unexpected file {shown!r}: expected <candidate id>.jpeg with a 40-hex candidate id"
        )
    return int(folder), stem


class _TopFolder:
    """Remembers the single top folder and strips it from member paths."""

    def __init__(self, source: str):
        self.source = source
        self.name: str | None = None

    def strip(self, parts: tuple[str, ...]) -> tuple[str, ...]:
        if self.name is None:
            self.name = parts[0]
            logger.debug("%s: top folder %s", self.source, self.name)
        elif parts[0] != self.name:
            raise ArchiveError(
                f"{self.source}: more than one top folder ({self.name!r} and {parts[0]!r}); an ImageNetV2 "
                f"archive holds a single folder such as imagenetv2-matched-frequency-format-val"
            )
        return parts[1:]


def decompressed(fileobj: BinaryIO) -> BinaryIO:
    """``fileobj`` itself, or a decompressing reader over it if it starts with a gzip, bzip2 or xz
    magic number (whatever the file name says). A truncated compressed stream raises EOFError."""
    buffered = fileobj if hasattr(fileobj, "peek") else io.BufferedReader(fileobj, buffer_size=TAR_BUFSIZE)
    magic = buffered.peek(6)[:6]
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=buffered, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(buffered)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(buffered)
    return buffered


def iter_tar(fileobj: BinaryIO, source: str) -> Iterator[Member]:
    """Yield the images of a tar (plain, gzip, bz2 or xz) read sequentially from ``fileobj``."""
    try:
        with tarfile.open(fileobj=decompressed(fileobj), mode="r|", bufsize=TAR_BUFSIZE) as tar:
            yield from _members(tar, lambda info: tar.extractfile(info).read(), source)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as e:
        raise _corrupt(source, e) from e


def is_plain_tar(path: os.PathLike | str) -> bool:
    """True unless the file starts with a gzip, bzip2 or xz magic number (whatever its name says)."""
    with open(path, "rb") as f:
        magic = f.read(6)
    return not (magic.startswith((b"\x1f\x8b", b"BZh")) or magic == b"\xfd7zXZ\x00")


@contextlib.contextmanager
def mapped_file(path: os.PathLike | str) -> Iterator[mmap.mmap]:
    """A read-only memory map of ``path``; closed at the end once nothing still points into it."""
    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as e:  # an empty file
            raise ArchiveError(f"{path}: the archive is truncated or corrupt ({e}). Download it again.") from None
    try:
        yield mapped
    finally:
        try:
            mapped.close()
        except BufferError:  # an error's traceback still holds an image: the map closes when it goes
            pass


def iter_tar_map(mapped: mmap.mmap, source: str) -> Iterator[Member]:
    """Yield the images of an uncompressed tar held in ``mapped`` (see :func:`mapped_file`):
    headers through :mod:`tarfile`, each image's bytes as a ``memoryview`` into the map (no copy;
    release them all before the map closes). The fast path of a plain tar."""
    view = memoryview(mapped)
    dropped = 0

    def read(info: tarfile.TarInfo):
        nonlocal dropped
        behind = (info.offset_data - DROP_BEHIND) // mmap.PAGESIZE * mmap.PAGESIZE
        if behind - dropped >= DROP_BEHIND and hasattr(mapped, "madvise"):
            # pages read long ago leave this process (they stay in the page cache; a later access
            # would read them back): memory stays flat in the archive size
            mapped.madvise(mmap.MADV_DONTNEED, dropped, behind - dropped)
            dropped = behind
        return view[info.offset_data:info.offset_data + info.size]

    try:
        with tarfile.open(fileobj=mapped, mode="r:") as tar:  # headers read from the map: no system calls
            yield from _members(_headers(tar), read, source)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise _corrupt(source, e) from e
    finally:
        view.release()


def _headers(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (info := tar.next()) is not None:
        tar.members.clear()  # tarfile keeps every header; memory stays flat without them
        yield info


def _corrupt(source: str, error: BaseException) -> ArchiveError:
    return ArchiveError(f"{source}: the archive is truncated or corrupt ({type(error).__name__}: {error}). Download it again.")


def _members(infos: Iterable[tarfile.TarInfo], read: Callable[[tarfile.TarInfo], bytes], source: str) -> Iterator[Member]:
    """Check each header against the release layout and yield the images, read with ``read``."""
    top = _TopFolder(source)
    for info in infos:
        parts = safe_parts(info.name, source)
        if not parts or is_junk(parts):
            if parts:
                logger.debug("%s: skipping OS junk %s", source, info.name)
            continue
        if not (info.isfile() or info.isdir()):
            kind = "link" if (info.issym() or info.islnk()) else "special file"
            raise ArchiveError(f"{source}: refusing member {info.name!r}: it is a {kind}, not a regular file")
        if len(parts) == 1 and info.isfile():
            raise ArchiveError(f"{source}: file {info.name!r} at the top level; images belong in class folders")
        rel = top.strip(parts)
        if info.isdir():
            if len(rel) > 1:
                raise ArchiveError(f"{source}: unexpected folder {info.name!r}: class folders hold files only")
            if rel:
                parse_class_folder(rel[0], source)
            continue
        class_index, candidate_id = parse_image_path(rel, source)
        data = read(info)
        if len(data) != info.size:
            raise _corrupt(source, EOFError(f"{info.name!r} ends after {len(data)} of its {info.size} bytes"))
        yield Member(class_index, candidate_id, "/".join(rel), data)


def parse_class_folder(folder: str, source: str) -> int:
    if not CLASS_FOLDER.fullmatch(folder) or int(folder) > 999:
        raise ArchiveError(f"{source}: class folder {folder!r} is not an integer class index 0-999")
    return int(folder)


def iter_folder(top: Path) -> Iterator[Member]:
    """Yield the images of an extracted top folder, classes in numeric order."""
    source = str(top)
    for class_dir in sorted(top.iterdir(), key=lambda p: (len(p.name), p.name)):
        parts = (class_dir.name,)
        if is_junk(parts):
            logger.debug("%s: skipping OS junk %s", source, class_dir.name)
            continue
        if class_dir.is_symlink():
            raise ArchiveError(f"{source}: refusing {class_dir.name!r}: it is a link")
        if not class_dir.is_dir():
            raise ArchiveError(f"{source}: file {class_dir.name!r} at the top level; images belong in class folders")
        parse_class_folder(class_dir.name, source)
        for path in sorted(class_dir.iterdir()):
            rel = (class_dir.name, path.name)
            if is_junk(rel):
                logger.debug("%s: skipping OS junk %s", source, "/".join(rel))
                continue
            if path.is_symlink() or not path.is_file():
                raise ArchiveError(f"{source}: refusing {'/'.join(rel)!r}: not a regular file")
            class_index, candidate_id = parse_image_path(rel, source)
            yield Member(class_index, candidate_id, "/".join(rel), path.read_bytes())


def find_top_folder(folder: Path, config_key: str) -> Path:
    """The extracted top folder for a config inside ``folder`` (or ``folder`` itself).

    ``config_key`` is the config name without punctuation (``"threshold07"``); any folder whose
    name contains it after removing punctuation matches, so older spellings are found too.
    """
    def has_classes(p: Path) -> bool:
        return (p / "0").is_dir() and (p / "999").is_dir()

    if has_classes(folder):
        return folder
    matches = [
        p
        for p in sorted(folder.iterdir())
        if p.is_dir() and not p.is_symlink() and config_key in re.sub(r"[^a-z0-9]", "", p.name.lower())
    ]
    if len(matches) > 1:
        raise ArchiveError(f"{folder}: several extracted folders match this config: {[m.name for m in matches]}")
    if matches and has_classes(matches[0]):
        return matches[0]
    if matches:
        raise ArchiveError(f"{matches[0]}: not an extracted ImageNetV2 folder (no class folders 0 ... 999)")
    raise FileNotFoundError(str(folder))


"""Integrity of released files: sizes and sha256, checked while the file is read.

The builders read each released file once; :class:`PrefetchingHashingReader` computes its
sha256 on the way so that verification costs no second pass. :func:`check_checksum` turns a mismatch into an error
that names the file, the expected and the actual hash, and recognises known older releases.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Mapping, Optional

CHUNK_SIZE = 1 << 20


class ChecksumError(ValueError):
    """A file's size or sha256 is not the pinned one."""


@dataclass(frozen=True)
class FileChecksum:
    """The pinned identity of one released file: its name, size in bytes and sha256 (hex)."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class KnownRelease:
    """Another release of a file, recognised by its checksum, with what to tell the user."""

    checksum: FileChecksum
    message: str


@dataclass
class Digest:
    """Size and sha256 of bytes seen so far."""

    size: int = 0
    _hash: "hashlib._Hash" = field(default_factory=hashlib.sha256, repr=False)

    def update(self, data: bytes) -> None:
        self.size += len(data)
        self._hash.update(data)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def file_digest(path: os.PathLike | str) -> Digest:
    """Size and sha256 of a file, read in 1 MiB chunks.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
    >>> _ = p.write_bytes(b"abc")
    >>> d = file_digest(p)
    >>> d.size, d.sha256[:12]
    (3, 'ba7816bf8f01')
    """
    digest = Digest()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest


class PrefetchingHashingReader(io.RawIOBase):
    """A read-only file wrapper that hashes every byte, read and hashed ahead by a thread.

    Call :meth:`drain` after the consumer stops reading (a tar reader stops at the end-of-archive
    marker, before the padding) so that the digest covers the whole file. The thread reads
    ``chunk_size`` blocks, hashes them (hashlib releases the GIL) and hands them over through a
    queue of at most ``depth`` blocks, so reading and hashing overlap with the consumer's work
    while memory stays bounded (``chunk_size * (depth + 2)``).
    """

    def __init__(self, raw: BinaryIO, chunk_size: int = CHUNK_SIZE, depth: int = 8):
        super().__init__()
        self._raw = raw
        self.digest = Digest()
        self._queue: "queue.Queue[bytes | BaseException | None]" = queue.Queue(maxsize=depth)
        self._buffer = memoryview(b"")
        self._eof = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(chunk_size,), daemon=True)
        self._thread.start()

    def _fill(self, chunk_size: int) -> None:
        try:
            while not self._stop.is_set():
                chunk = self._raw.read(chunk_size)
                if not chunk:
                    break
                self.digest.update(chunk)
                self._queue.put(chunk)
            self._queue.put(None)
        except BaseException as e:  # handed to the consumer
            self._queue.put(e)

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bool:
        if self._eof:
            return False
        item = self._queue.get()
        if item is None:
            self._eof = True
            return False
        if isinstance(item, BaseException):
            self._eof = True
            raise item
        self._buffer = memoryview(item)
        return True

    def readinto(self, buffer) -> int:
        if not self._buffer and not self._next_chunk():
            return 0
        n = min(len(buffer), len(self._buffer))
        buffer[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = [bytes(self._buffer)]
            self._buffer = memoryview(b"")
            while self._next_chunk():
                parts.append(bytes(self._buffer))
                self._buffer = memoryview(b"")
            return b"".join(parts)
        parts = []
        while size > 0 and (self._buffer or self._next_chunk()):
            take = self._buffer[:size]
            parts.append(bytes(take))
            self._buffer = self._buffer[len(take):]
            size -= len(take)
        return b"".join(parts)

    def drain(self) -> Digest:
        """Read to the end (the tar reader stops before the padding) and return the digest."""
        self._buffer = memoryview(b"")
        while self._next_chunk():
            self._buffer = memoryview(b"")
        self._thread.join()
        return self.digest

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                self._queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self._raw.close()
        super().close()


class BackgroundDigest:
    """Size and sha256 of a file, computed by a thread while the caller reads the file its own
    way (hashlib releases the GIL on large blocks). :meth:`result` waits and returns the digest.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
    >>> _ = p.write_bytes(b"abc")
    >>> BackgroundDigest(p).result().sha256[:12]
    'ba7816bf8f01'
    """

    def __init__(self, path: os.PathLike | str, chunk_size: int = CHUNK_SIZE):
        self.digest = Digest()
        self._error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path, chunk_size), daemon=True)
        self._thread.start()

    def _run(self, path, chunk_size: int) -> None:
        try:
            with open(path, "rb", buffering=0) as f:
                while not self._stop.is_set() and (chunk := f.read(chunk_size)):
                    self.digest.update(chunk)
        except BaseException as e:  # handed to result()
            self._error = e

    def result(self) -> Digest:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.digest

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()


def check_checksum(
    path: os.PathLike | str,
    actual: Digest,
    expected: FileChecksum,
    known_releases: Mapping[str, KnownRelease] | None = None,
) -> None:
    """Raise :class:`ChecksumError` unless ``actual`` matches ``expected``.

    ``known_releases`` maps sha256 → :class:`KnownRelease` for other releases of the file that
    should be named in the error instead of a bare mismatch.
    """
    if actual.size == expected.size and actual.sha256 == expected.sha256:
        return
    known = (known_releases or {}).get(actual.sha256)
    if known is not None:
        raise ChecksumError(f"{Path(path).name}: {known.message}")
    raise ChecksumError(
        f"checksum mismatch for {path}: expected sha256 {expected.sha256} ({expected.size} bytes), "
        f"got sha256 {actual.sha256} ({actual.size} bytes). The file is corrupt, truncated or not "
        f"the pinned release of {expected.name}; delete it and download it again, or pass "
        f"verification_mode='no_checks' (--no-verify) if you know what you are doing."
    )


def verify_file(
    path: os.PathLike | str,
    expected: FileChecksum,
    known_releases: Optional[Mapping[str, KnownRelease]] = None,
) -> Digest:
    """Hash a whole file and check it against ``expected``; return its digest."""
    digest = file_digest(path)
    check_checksum(path, digest, expected, known_releases)
    return digest

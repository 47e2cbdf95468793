"""Checking that every image of a set is a complete JPEG, on all cores when it must be decoded.

Every image, in every mode, must start with the JPEG start-of-image marker (``FF D8 FF``) and
end with the end-of-image marker (``FF D9``, trailing zero padding allowed): a PNG or a
truncated file named ``<id>.jpeg`` is refused. When the bytes are not covered by a pinned
checksum of the release (a rebuilt set, ``no_checks``, an extracted folder) every image is also
decoded at 1/8 scale, which reads every entropy-coded scan. :class:`ImageChecker` does that in
``num_proc`` worker processes while the archive is read; errors name the file.

>>> checker = ImageChecker("archive.tar", full_decode=False)
>>> checker.add("0/x.jpeg", b"\\x89PNG\\r\\n\\x1a\\n")
Traceback (most recent call last):
...
imagenetv2.archive.ArchiveError: archive.tar: 0/x.jpeg holds PNG bytes, not a JPEG; ImageNetV2 images are the original JPEG files
"""

from __future__ import annotations

import collections
import io
import multiprocessing
import signal
from typing import Optional, Sequence

from .archive import ArchiveError

SOI = b"\xff\xd8\xff"
EOI = b"\xff\xd9"
CHUNK_IMAGES = 64  # images per job handed to a worker
OTHER_FORMATS = {b"\x89PNG": "PNG", b"GIF8": "GIF", b"RIFF": "WebP", b"BM": "BMP", b"II*\x00": "TIFF", b"MM\x00*": "TIFF"}


def has_jpeg_markers(data) -> bool:
    r"""True if ``data`` (bytes or a memoryview) starts with SOI and ends with EOI (zero padding
    after EOI allowed; a long padding is left to the decoder).

    >>> has_jpeg_markers(b"\xff\xd8\xff\xe0...\xff\xd9\x00\x00"), has_jpeg_markers(b"\x89PNG")
    (True, False)
    """
    return bytes(data[:3]) == SOI and bytes(data[-4096:]).rstrip(b"\x00").endswith(EOI)


def decode_problem(data: bytes) -> Optional[str]:
    """None if ``data`` decodes as a JPEG at 1/8 scale, else what is wrong."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = image.format
            image.draft("RGB", (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except Exception as e:  # noqa: BLE001 - any decoder error is the file's problem
        return f"does not decode as an image ({type(e).__name__}: {e})"
    if kind != "JPEG":
        return f"holds {kind} bytes, not a JPEG; ImageNetV2 images are the original JPEG files"
    return None


def marker_problem(data) -> Optional[str]:
    """None if ``data`` has the JPEG markers, else what is wrong (decoding to find out)."""
    if has_jpeg_markers(data):
        return None
    head = bytes(data[:8])
    for magic, kind in OTHER_FORMATS.items():
        if head.startswith(magic):
            return f"holds {kind} bytes, not a JPEG; ImageNetV2 images are the original JPEG files"
    return decode_problem(data) or "is not a complete JPEG (no end-of-image marker FF D9)"


def decode_chunk(chunk: Sequence[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """``[(path, problem)]`` for the images of ``chunk`` that do not decode (run in a worker)."""
    return [(path, problem) for path, data in chunk if (problem := decode_problem(data)) is not None]


def _ignore_sigint() -> None:  # Ctrl-C is the parent's to handle; workers are terminated
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ImageChecker:
    """Checks images as they are read: markers always, full decodes in ``num_proc`` processes.

    Call :meth:`add` for each image and :meth:`finish` at the end (which waits for the decodes
    and raises the first problem), or :meth:`close` on error. With ``num_proc`` 1 (or without
    ``full_decode``) everything runs in this process. At most ``2 * num_proc`` chunks are in
    flight, so memory stays bounded whatever the set's size.
    """

    def __init__(self, source: str, full_decode: bool, num_proc: int = 1):
        self.source = source
        self.full_decode = full_decode
        self.num_proc = max(1, int(num_proc))
        self._chunk: list[tuple[str, bytes]] = []
        self._pending: collections.deque = collections.deque()
        self._pool = None
        if full_decode and self.num_proc > 1:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else None)
            self._pool = context.Pool(self.num_proc, initializer=_ignore_sigint)

    def add(self, path: str, data) -> None:
        problem = marker_problem(data)
        if problem is not None:
            self._raise([(path, problem)])
        if not self.full_decode:
            return
        self._chunk.append((path, bytes(data)))
        if len(self._chunk) >= CHUNK_IMAGES:
            self._submit()

    def _submit(self) -> None:
        chunk, self._chunk = self._chunk, []
        if not chunk:
            return
        if self._pool is None:
            self._raise(decode_chunk(chunk))
            return
        self._pending.append(self._pool.apply_async(decode_chunk, (chunk,)))
        while len(self._pending) > 2 * self.num_proc:
            self._raise(self._pending.popleft().get())

    def _raise(self, problems: list[tuple[str, str]]) -> None:
        if problems:
            path, problem = problems[0]
            raise ArchiveError(f"{self.source}: {path} {problem}")

    def finish(self) -> None:
        """Wait for every decode; raise the first problem found."""
        self._submit()
        while self._pending:
            self._raise(self._pending.popleft().get())
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        self._pending.clear()

    def __enter__(self) -> "ImageChecker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

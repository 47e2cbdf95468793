"""What the dataset builders of this project share beyond export.

``datasets`` wraps any error raised while generating a dataset in a ``DatasetGenerationError``
whose message is only "An error occurred while generating the dataset". Our builders raise
errors that say what is wrong and how to fix it; :class:`ClearErrors` lets those reach the user
unwrapped (and says so when the cache folder is full). The half-written cache folder has
already been removed by then.

It also keeps verification honest: a builder records what it verified (:class:`Verification`)
in the cache folder it wrote, and a later build that asks for verification regenerates a
cached dataset that was built without it (or from files that changed since), so that a
``no_checks`` build never makes a later checked build pass without checking.

And it streams: :meth:`ClearErrors.stream_tables` runs the builder's own split generator and
yields its Arrow tables without writing the ``datasets`` cache, for the Hub-ready export.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from datasets.exceptions import DatasetGenerationError
from datasets.utils.info_utils import VerificationMode

VERIFICATION_FILE = "verification.json"


class CacheFullError(OSError):
    """The ``datasets`` cache folder ran out of space while a dataset was written or downloaded."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class DownloadError(ConnectionError):
    """A released file could not be downloaded; the message says from where and what to do."""


@dataclass
class Verification:
    """What a build verified: ``verified`` is False when nothing was, and ``statement`` says what
    (or why not), in a sentence fit for the dataset card.

    >>> Verification(False, "nothing: built with --no-verify").record()["verified"]
    False
    """

    verified: bool
    statement: str
    files: dict = field(default_factory=dict)  # path -> [size, mtime_ns] of the files verified

    def record(self) -> dict:
        return asdict(self)

    def still_holds(self) -> bool:
        """True if it verified something and every file verified is unchanged since."""
        return self.verified and all(_stat(p) == list(s) for p, s in self.files.items())


def _stat(path: str) -> Optional[list]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def file_stats(*paths: os.PathLike | str) -> dict:
    """``{path: [size, mtime_ns]}`` for :attr:`Verification.files`."""
    return {os.fspath(p): _stat(p) for p in paths}


def read_verification(folder: os.PathLike | str) -> Optional[Verification]:
    try:
        record = json.loads((Path(folder) / VERIFICATION_FILE).read_text("utf-8"))
        return Verification(bool(record["verified"]), str(record["statement"]), dict(record.get("files") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def default_num_proc() -> int:
    """The cores this process may use (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


class ClearErrors:
    """Mixin for a ``datasets`` builder: clear errors, honest verification, and streaming.

    It records the verification mode as ``self.verify`` (False only for ``no_checks``) and the
    decoding processes as ``self.num_proc`` (``download_and_prepare(num_proc=...)``; default:
    the machine's cores) for builders that verify and decode while reading. The builder sets
    ``self.verification`` (a :class:`Verification`) while it generates.
    """

    CLEAR_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, DownloadError)
    verify: bool = True
    num_proc: int = 1
    verification: Optional[Verification] = None

    def download_and_prepare(self, *args, num_proc: Optional[int] = None, **kwargs):
        self.num_proc = num_proc or default_num_proc()
        if self._must_regenerate(kwargs.get("verification_mode"), kwargs.get("download_mode")):
            kwargs["download_mode"] = "reuse_cache_if_exists"  # regenerate, keeping the downloads
        try:
            result = super().download_and_prepare(*args, **kwargs)
        except DatasetGenerationError as e:
            raise self._unwrapped(e) from None
        if self.verification is None:  # a cache hit: what the cached build verified
            self.verification = read_verification(self._cache_dir)
        return result

    def _must_regenerate(self, verification_mode, download_mode) -> bool:
        if VerificationMode(verification_mode or "basic_checks") == VerificationMode.NO_CHECKS:
            return False
        if download_mode not in (None, "reuse_dataset_if_exists"):
            return False
        if not (Path(self._cache_dir) / "dataset_info.json").is_file():
            return False
        cached = read_verification(self._cache_dir)
        return cached is None or not cached.still_holds()

    def cache_full(self, error: OSError, doing: str) -> CacheFullError:
        """The error for a full cache folder while ``doing`` (e.g. "writing", "downloading")."""
        return CacheFullError(
            error.errno,
            f"the datasets cache folder {Path(self._cache_dir).parent} is full ({os.strerror(error.errno)}) "
            f"while {doing} {self.dataset_name}/{self.config.name}; free some space or pass another "
            f"cache folder (--cache-dir, or cache_dir=...)",
        )

    def download_failed(self, error: BaseException, message: str) -> BaseException:
        """The error for a failed download: a full cache says so; anything else is ``message``."""
        if is_disk_full(error):
            return self.cache_full(error, "downloading")
        return DownloadError(message)

    def _unwrapped(self, error: DatasetGenerationError) -> BaseException:
        cause = error.__cause__
        if is_disk_full(cause):
            return self.cache_full(cause, "writing")
        if isinstance(cause, self.CLEAR_ERRORS) and not isinstance(cause, DatasetGenerationError):
            return cause.with_traceback(cause.__traceback__)
        return error

    def _download_and_prepare(self, dl_manager, verification_mode, **kwargs):
        self.verify = VerificationMode(verification_mode) != VerificationMode.NO_CHECKS
        self.verification = None
        result = super()._download_and_prepare(dl_manager, verification_mode, **kwargs)
        record = (self.verification or Verification(False, "nothing: the builder recorded no verification")).record()
        # self._output_dir is the .incomplete folder here: the record is renamed with the dataset
        (Path(self._output_dir) / VERIFICATION_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        return result

    def stream_tables(self, verification_mode: str = "basic_checks", num_proc: Optional[int] = None) -> Iterator:
        """Yield the test split as Arrow tables straight from the source, without the cache.

        The same split generator, checks and rows as :meth:`download_and_prepare`; downloads
        still go to the cache's ``downloads/`` folder. ``self.verification`` is set at the end.
        """
        from datasets import DownloadConfig, DownloadManager

        self.verify = VerificationMode(verification_mode) != VerificationMode.NO_CHECKS
        self.num_proc = num_proc or default_num_proc()
        self.verification = None
        config = DownloadConfig(cache_dir=self._cache_downloaded_dir, use_etag=False, token=self.token)
        dl_manager = DownloadManager(
            dataset_name=self.dataset_name, download_config=config, data_dir=self.config.data_dir,
            base_path=self.base_path, record_checksums=False,
        )
        generators = self._split_generators(dl_manager)
        if [str(g.name) for g in generators] != ["test"]:
            raise RuntimeError(f"stream_tables expects one test split, got {[str(g.name) for g in generators]}")
        for _, table in self._generate_tables(**generators[0].gen_kwargs):
            yield table

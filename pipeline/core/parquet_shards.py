"""Writing one config's Arrow tables into Parquet shards as they come, in one pass.

The shards are written the way ``datasets`` writes Parquet (``Dataset.to_parquet``,
``push_to_hub``): the features in the schema metadata, content-defined chunking, a page index,
images stored uncompressed and plain-encoded, other columns snappy-compressed with
dictionaries. A shard is closed once it holds ``max_shard_size`` bytes of Arrow data; the files
are named ``<split>-0000i-of-0000n.parquet`` when the count is known, at the end.

The Parquet library aborts the process (``Check failed``, SIGABRT) when its sink fails in the
middle of a column, as a full disk or a Ctrl-C inside a Python file's ``write`` does. So the sink
here never fails: :class:`GuardedFile` keeps the first error and swallows the rest of the shard,
and the writer raises that error itself once the Parquet call has returned; Ctrl-C is deferred
to the same point (:func:`deferred_sigint`). On any error the caller's temporary folder, with the
shards written so far, is removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import BinaryIO, Optional

import pyarrow as pa
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

DEFAULT_MAX_SHARD_SIZE = 500_000_000  # bytes of Arrow data per Parquet shard, as push_to_hub


def parquet_options(features) -> dict:
    """The ``pq.ParquetWriter`` options ``datasets`` uses for these features."""
    from datasets import config
    from datasets.arrow_writer import get_parquet_column_options

    schema = features.arrow_schema
    return {
        "use_content_defined_chunking": config.DEFAULT_CDC_OPTIONS,
        "write_page_index": True,
        **get_parquet_column_options(features, schema),
    }


def open_shard(path: Path) -> BinaryIO:
    """The file a shard is written to."""
    return open(path, "wb")


class GuardedFile:
    """A write-only file that never raises into the Parquet library: the first error is kept
    (:attr:`error`) and everything after it is dropped; :meth:`check` raises it."""

    def __init__(self, raw: BinaryIO, path: os.PathLike | str = ""):
        self.raw = raw
        self.path = os.fspath(path)
        self.error: Optional[BaseException] = None
        self.closed = False

    def write(self, data) -> int:
        if self.error is None:
            try:
                self.raw.write(data)
            except BaseException as e:  # noqa: BLE001 - re-raised by check()
                self.error = e
        return len(data)

    def flush(self) -> None:
        if self.error is None:
            try:
                self.raw.flush()
            except BaseException as e:  # noqa: BLE001
                self.error = e

    def writable(self) -> bool:
        return True

    def check(self) -> None:
        """Raise the error the file met, naming the file."""
        error = self.error
        if isinstance(error, OSError) and error.errno is not None and not error.filename:
            raise OSError(error.errno, error.strerror or str(error), self.path) from error
        if error is not None:
            raise error

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.raw.close()
            except BaseException as e:  # noqa: BLE001
                self.error = self.error or e


@contextlib.contextmanager
def deferred_sigint():
    """Hold Ctrl-C (SIGINT) while the block runs, then raise KeyboardInterrupt; a second Ctrl-C
    interrupts at once. Outside the main thread the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []

    def hold(signum, frame):
        if caught:
            raise KeyboardInterrupt
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


class ShardWriter:
    """Write tables of ``features`` to ``folder/<split>-*.parquet``, rolling over at ``max_shard_size``.

    >>> import tempfile, pathlib, datasets
    >>> features = datasets.Features({"x": datasets.Value("int64")})
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with ShardWriter(folder, "test", features) as w:
    ...     w.write(pa.table({"x": [1, 2, 3]}))
    >>> [p.name for p in w.paths], w.num_rows
    (['test-00000-of-00001.parquet'], 3)
    """

    def __init__(self, folder: Path, split: str, features, max_shard_size: int = DEFAULT_MAX_SHARD_SIZE):
        self.folder = Path(folder)
        self.split = split
        self.features = features
        self.schema = features.arrow_schema
        self.max_shard_size = max_shard_size
        self.options = parquet_options(features)
        self.num_rows = 0
        self.num_bytes = 0
        self.paths: list[Path] = []
        self._parts: list[Path] = []
        self._file: Optional[BinaryIO] = None
        self._writer: Optional[pq.ParquetWriter] = None
        self._shard_bytes = 0

    def write(self, table: pa.Table) -> None:
        """Append ``table`` (cast to the features' schema) to the current shard."""
        if table.num_rows == 0:
            return
        if table.schema != self.schema:
            table = table.cast(self.schema)
        if self._writer is not None and self._shard_bytes >= self.max_shard_size:
            self._close_shard()
        if self._writer is None:
            self._open_shard()
        with deferred_sigint():
            self._writer.write_table(table)
        self._file.check()
        self.num_rows += table.num_rows
        self.num_bytes += table.nbytes
        self._shard_bytes += table.nbytes

    def _open_shard(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        part = self.folder / f".{self.split}-{len(self._parts):05d}.parquet.part"
        self._parts.append(part)
        self._file = GuardedFile(open_shard(part), part)
        self._writer = pq.ParquetWriter(self._file, schema=self.schema, **self.options)
        self._shard_bytes = 0

    def _close_shard(self) -> None:
        writer, file = self._writer, self._file
        self._writer, self._file = None, None
        with deferred_sigint():
            if "use_content_defined_chunking" in self.options:
                cdc = json.dumps(self.options["use_content_defined_chunking"])
                writer.add_key_value_metadata({"content_defined_chunking": cdc})
            writer.close()
            file.close()
        file.check()

    def close(self) -> list[Path]:
        """Finish the last shard and give every shard its final name; returns the paths."""
        if self._writer is None and not self._parts:
            self._open_shard()  # an empty config still gets one (empty) shard
        if self._writer is not None:
            self._close_shard()
        n = len(self._parts)
        for i, part in enumerate(self._parts):
            path = self.folder / f"{self.split}-{i:05d}-of-{n:05d}.parquet"
            os.replace(part, path)
            self.paths.append(path)
        return self.paths

    def abort(self) -> None:
        """Drop the open shard after an error; the Parquet writer finishes into the void."""
        writer, file = self._writer, self._file
        self._writer, self._file = None, None
        if file is not None:
            file.error = file.error or OSError("shard abandoned")  # nothing more reaches the disk
            if writer is not None:
                with deferred_sigint():
                    writer.close()
            file.close()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

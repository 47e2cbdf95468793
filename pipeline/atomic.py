"""Atomic writes: nothing half-written is ever left where a user would load it.

Every output of this project (a Hub-ready folder, a revision file, a table, a results file) is
first written to a temporary sibling and then renamed into place, so that an interrupted or
failed run leaves either the previous output or the new one, never a mixture.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]


@contextlib.contextmanager
def atomic_directory(target: PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder that replaces ``target`` when the block succeeds.

    The temporary folder is a hidden sibling of ``target`` (same file system, so the final
    rename is atomic). If ``target`` already exists it is moved aside first and deleted only
    after the new folder is in place; if the block raises, the temporary folder is removed and
    ``target`` is untouched.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_directory(root / "out") as tmp:
    ...     _ = (tmp / "a.txt").write_text("hello")
    >>> (root / "out" / "a.txt").read_text()
    'hello'
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_directory(tmp, target)


def replace_directory(source: Path, target: Path) -> None:
    """Move folder ``source`` to ``target``, replacing an existing ``target`` without losing it on failure."""
    backup = None
    if target.exists() or target.is_symlink():
        backup = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        backup.rmdir()
        os.replace(target, backup)
    try:
        os.replace(source, target)
    except BaseException:
        if backup is not None:
            os.replace(backup, target)
        raise
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(target: PathLike, mode: str = "wb") -> Iterator:
    """Open a temporary sibling of ``target`` for writing; rename it over ``target`` on success.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "revision.json"
    >>> with atomic_file(path, "w") as f:
    ...     _ = f.write("{}")
    >>> path.read_text()
    '{}'
    """
    if "w" not in mode:
        raise ValueError(f"atomic_file writes a new file; mode must contain 'w', got {mode!r}")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(target: PathLike, text: str) -> Path:
    """Write ``text`` to ``target`` atomically and return the path."""
    with atomic_file(target, "w") as f:
        f.write(text)
    return Path(target)


def atomic_write_bytes(target: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically and return the path."""
    with atomic_file(target, "wb") as f:
        f.write(data)
    return Path(target)

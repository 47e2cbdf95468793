"""Atomic writes: nothing half-written is ever left where a user would load it.

Every output of this project (a Hub-ready folder, a revision file, a table, a results file) is
first written to a temporary sibling and then renamed into place, so that an interrupted or
failed run leaves either the previous output or the new one, never a mixture. Temporary names
carry the writer's process id (``.NAME.tmp-<pid>-XXXX``), so that a later run removes the ones an
interrupted run left (:func:`remove_stale_temporaries`), and what is written gets the permissions
the umask allows (``0755``/``0644`` under umask ``022``), as a plain ``open`` would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]


def current_umask() -> int:
    """The process's umask, read without changing it where ``/proc`` allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temp_prefix(name: str) -> str:
    return f".{name}.tmp-{os.getpid()}-"


def pid_alive(pid: int) -> bool:
    """True when a process with this id exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(target: PathLike) -> list[Path]:
    """Remove the temporary siblings of ``target`` left by interrupted runs whose process is gone."""
    target = Path(target)
    removed = []
    if not target.parent.is_dir():
        return removed
    for path in target.parent.glob(f".{target.name}.tmp-*"):
        pid = path.name[len(f".{target.name}.tmp-"):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def make_temp_dir(target: Path) -> Path:
    """An empty hidden sibling of ``target`` with the umask's permissions (not mkdtemp's 0700)."""
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name), dir=target.parent))
    os.chmod(tmp, 0o777 & ~current_umask())
    return tmp


def make_temp_path(target: Path, suffix: str = "") -> Path:
    """An empty hidden sibling file of ``target`` (a temporary name a later run may clean up), umask's permissions."""
    fd, name = tempfile.mkstemp(prefix=_temp_prefix(Path(target).name), suffix=suffix, dir=Path(target).parent)
    os.close(fd)
    os.chmod(name, 0o666 & ~current_umask())
    return Path(name)


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
    remove_stale_temporaries(target)
    tmp = make_temp_dir(target)
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
    remove_stale_temporaries(target)
    fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(target.name), dir=target.parent)
    tmp = Path(tmp_name)
    try:
        os.chmod(fd, 0o666 & ~current_umask())
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

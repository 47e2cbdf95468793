"""Output ownership: a command replaces only what a command of this project wrote.

Every folder a command writes carries a small marker file, :data:`MARKER`, naming the command
and the version that wrote it. A file output is recorded in the marker of the folder it lies in
(``"files"``). Before any work a command calls :func:`check_output_dir` or
:func:`check_output_file`: an existing output is replaced only when the marker says this project
wrote it; anything else is refused with a message naming the path and the fix. An output that
is, or lies inside, or contains one of the command's inputs is refused too.

:func:`owned_directory` and :func:`owned_file` combine the check, the atomic write of
:mod:`pipeline.core.atomic` and the marker, so that a command needs one line::

    with owned_directory(output, "ingest", inputs=[candidates, *results]) as tmp:
        ...  # write into tmp; it replaces output at the end, marked

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> with owned_directory(root / "pool", "ingest") as tmp:
...     _ = (tmp / "a.txt").write_text("x")
>>> owner(root / "pool")["command"]
'ingest'
>>> (root / "notes").mkdir(); _ = (root / "notes" / "thesis.tex").write_text("mine")
>>> check_output_dir(root / "notes", "ingest")
Traceback (most recent call last):
...
pipeline.core.ownership.OutputError: refusing to replace ...notes: it exists and is not an ingest output (it was not written by this project: no .imagenetv2-hf.json marker); pass another --output, or remove it yourself

A folder another command wrote is refused too (``ingest --output`` on a build-set output would
otherwise delete it), and so is a read-only file. :func:`owned_files` writes several files as
one unit (the revision, its report and its decisions): all are the new run's, or none.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence, Union

from pipeline.core.atomic import atomic_directory, atomic_file, make_temp_path, remove_stale_temporaries

PathLike = Union[str, "os.PathLike[str]"]

MARKER = ".imagenetv2-hf.json"
PROJECT = "imagenetv2-hf"


class OutputError(ValueError):
    """An output path would replace something this project did not write, or overlaps an input."""


def version() -> str:
    """The installed version of this project (``0+unknown`` when run from a bare checkout)."""
    try:
        from importlib.metadata import version as _version

        return _version(PROJECT)
    except Exception:  # noqa: BLE001 - not installed
        return "0+unknown"


def marker_record(command: str, files: Iterable[str] = ()) -> dict:
    """What the marker says: the project, the command, the version, when, and the files it owns."""
    record = {
        "project": PROJECT,
        "command": command,
        "version": version(),
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    files = sorted(set(files))
    if files:
        record["files"] = files
    return record


def owner(folder: PathLike) -> Optional[dict]:
    """The marker of ``folder`` (a dict), or None if it has none or it is not ours."""
    path = Path(folder) / MARKER
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("project") == PROJECT else None


def write_marker(folder: PathLike, command: str, files: Iterable[str] = (), *, file_command: Optional[str] = None) -> Path:
    """Mark ``folder`` as written by ``command`` (keeping the files an earlier marker owned).

    ``files`` are recorded as written by ``file_command`` (default ``command``) in the marker's
    ``file_commands``, so that another command does not replace them.
    """
    folder = Path(folder)
    previous = owner(folder) or {}
    files = list(files)
    record = marker_record(command, [*previous.get("files", ()), *files])
    commands = dict(previous.get("file_commands") or {}) | {name: file_command or command for name in files}
    if commands:
        record["file_commands"] = dict(sorted(commands.items()))
    path = folder / MARKER
    with atomic_file(path, "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    return path


def _resolved(path: PathLike) -> Path:
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def check_not_input(output: PathLike, inputs: Iterable[Optional[PathLike]] = ()) -> None:
    """Refuse an output that is, lies inside, or contains one of ``inputs`` (before any work)."""
    out = _resolved(output)
    for given in inputs:
        if given is None:
            continue
        source = _resolved(given)
        if out == source or source in out.parents or out in source.parents:
            raise OutputError(
                f"refusing to write {output}: it is, contains or lies inside the input {given}; "
                "pass an --output outside the inputs"
            )


def _an(command: str) -> str:
    return f"an {command}" if command[:1].lower() in "aeiou" else f"a {command}"


def check_output_dir(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Check before the work that folder ``output`` may be written: absent, empty, or marked by ``command``."""
    out = Path(output)
    check_not_input(out, inputs)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputError(f"refusing to write the folder {out}: a file of that name exists; pass another --output, or remove it yourself")
    if out.is_dir() and any(out.iterdir()):
        record = owner(out)
        if record is None:
            raise OutputError(
                f"refusing to replace {out}: it exists and is not {_an(command)} output (it was not written by this "
                f"project: no {MARKER} marker); pass another --output, or remove it yourself"
            )
        if record.get("command") != command:
            raise OutputError(
                f"refusing to replace {out}: it is {_an(str(record.get('command')))} output, not {_an(command)} output; "
                "pass another --output, or remove it yourself"
            )
    return out


def _check_writable(out: Path) -> None:
    import stat

    if out.exists() and not out.is_symlink() and not out.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise OutputError(f"refusing to replace {out}: it is read-only; pass another --output, or make it writable (chmod u+w)")


def check_output_file(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Check before the work that file ``output`` may be written: absent, or recorded in its folder's marker."""
    out = Path(output)
    check_not_input(out, inputs)
    if out.is_dir():
        raise OutputError(f"refusing to write the file {out}: it is a folder; pass a file name as --output")
    if out.exists() or out.is_symlink():
        record = owner(out.parent)
        if record is None or out.name not in record.get("files", ()):
            raise OutputError(
                f"refusing to replace {out}: it exists and was not written by this project "
                f"(not listed in {out.parent / MARKER}); pass another --output, or remove it yourself"
            )
        wrote = (record.get("file_commands") or {}).get(out.name, command)
        if wrote != command:
            raise OutputError(f"refusing to replace {out}: {wrote} wrote it, not {command}; pass another --output, or remove it yourself")
    _check_writable(out)
    for parent in (out.parent, *out.parent.parents):
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"cannot write {out}: {parent} is a file, not a folder")
            break
    return out


@contextlib.contextmanager
def owned_directory(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Iterator[Path]:
    """Check ``output``, yield a temporary folder, mark it, and rename it over ``output`` at the end."""
    check_output_dir(output, command, inputs=inputs)
    with atomic_directory(output) as tmp:
        yield tmp
        write_marker(tmp, command)  # keeps the files (and their commands) recorded in the block


@contextlib.contextmanager
def owned_file(output: PathLike, command: str, mode: str = "wb", *, inputs: Iterable[Optional[PathLike]] = ()) -> Iterator:
    """Check ``output``, open a temporary sibling, rename it over ``output``, and record it in the folder's marker."""
    out = check_output_file(output, command, inputs=inputs)
    with atomic_file(out, mode) as f:
        yield f
    record_files(out.parent, command, [out.name])


@contextlib.contextmanager
def owned_files(outputs: Sequence[PathLike], command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Iterator[list[Path]]:
    """Write several files as one unit: all are replaced by the new ones, or none is.

    Every output is checked first (:func:`check_output_file`); the block gets a temporary path
    for each, beside it, to write. At the end the old files are moved aside and the new ones
    renamed into place in the given order (so put the file that names the others last); if a
    rename fails, the old files are put back. The temporaries are removed if the block raises.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with owned_files([root / "r.report.json", root / "r.json"], "sample") as (report, revision):
    ...     _ = report.write_text("{}"); _ = revision.write_text("{}")
    >>> sorted(p.name for p in root.iterdir())
    ['.imagenetv2-hf.json', 'r.json', 'r.report.json']
    """
    inputs = list(inputs)
    targets = [check_output_file(o, command, inputs=inputs) for o in outputs]
    if len({_resolved(t) for t in targets}) != len(targets):
        raise OutputError(f"the outputs {', '.join(map(str, targets))} name the same file twice")
    temporaries = []
    try:
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(target)
            temporaries.append(make_temp_path(target))
        yield list(temporaries)
        _replace_all(temporaries, targets)
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)
    for folder in {t.parent for t in targets}:
        record_files(folder, command, [t.name for t in targets if t.parent == folder])


def _replace_all(temporaries: Sequence[Path], targets: Sequence[Path]) -> None:
    # the old files stay in place, hard-linked (or copied) to backups, so that an interruption
    # leaves every target whole; if a rename fails, the files already renamed are undone
    backups: dict[Path, Path] = {}
    placed: list[Path] = []
    try:
        for target in targets:
            if target.is_file():
                backup = backups[target] = make_temp_path(target, ".old")
                backup.unlink()
                try:
                    os.link(target, backup)
                except OSError:
                    shutil.copy2(target, backup)
        for tmp, target in zip(temporaries, targets):
            os.replace(tmp, target)
            placed.append(target)
    except BaseException:
        for target in placed:
            if target in backups:
                os.replace(backups[target], target)
            else:
                target.unlink(missing_ok=True)
        raise
    finally:
        for backup in backups.values():
            backup.unlink(missing_ok=True)


def record_files(folder: PathLike, command: str, names: Iterable[str]) -> None:
    """Record files a command wrote in ``folder``'s marker, so that a later run may replace them."""
    write_marker(folder, (owner(folder) or {}).get("command", command), names, file_command=command)


def write_owned_text(output: PathLike, text: str, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Write ``text`` to ``output`` through :func:`owned_file` and return the path."""
    with owned_file(output, command, "w", inputs=inputs) as f:
        f.write(text)
    return Path(output)

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
pipeline.core.ownership.OutputError: refusing to replace ...notes: it exists and was not written by this project (no .imagenetv2-hf.json marker); pass another --output, or remove it yourself
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from pipeline.core.atomic import atomic_directory, atomic_file

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


def write_marker(folder: PathLike, command: str, files: Iterable[str] = ()) -> Path:
    """Mark ``folder`` as written by ``command`` (keeping the files an earlier marker owned)."""
    folder = Path(folder)
    previous = owner(folder) or {}
    record = marker_record(command, [*previous.get("files", ()), *files])
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


def check_output_dir(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Check before the work that folder ``output`` may be written: absent, empty, or marked ours."""
    out = Path(output)
    check_not_input(out, inputs)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise OutputError(f"refusing to write the folder {out}: a file of that name exists; pass another --output, or remove it yourself")
    if out.is_dir() and any(out.iterdir()) and owner(out) is None:
        raise OutputError(
            f"refusing to replace {out}: it exists and was not written by this project (no {MARKER} marker); "
            "pass another --output, or remove it yourself"
        )
    return out


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
    parent = out.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"cannot write {out}: {parent} is a file, not a folder")
    return out


@contextlib.contextmanager
def owned_directory(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Iterator[Path]:
    """Check ``output``, yield a temporary folder, mark it, and rename it over ``output`` at the end."""
    check_output_dir(output, command, inputs=inputs)
    with atomic_directory(output) as tmp:
        yield tmp
        write_marker(tmp, command, (owner(tmp) or {}).get("files", ()))


@contextlib.contextmanager
def owned_file(output: PathLike, command: str, mode: str = "wb", *, inputs: Iterable[Optional[PathLike]] = ()) -> Iterator:
    """Check ``output``, open a temporary sibling, rename it over ``output``, and record it in the folder's marker."""
    out = check_output_file(output, command, inputs=inputs)
    with atomic_file(out, mode) as f:
        yield f
    record_files(out.parent, command, [out.name])


def record_files(folder: PathLike, command: str, names: Iterable[str]) -> None:
    """Record files a command wrote in ``folder``'s marker, so that a later run may replace them."""
    write_marker(folder, (owner(folder) or {}).get("command", command), names)


def write_owned_text(output: PathLike, text: str, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Write ``text`` to ``output`` through :func:`owned_file` and return the path."""
    with owned_file(output, command, "w", inputs=inputs) as f:
        f.write(text)
    return Path(output)

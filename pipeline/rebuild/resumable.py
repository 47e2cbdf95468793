"""Output folders that a command fills over several runs (``search``, ``download``).

Such a folder is marked as the command's when it is first made (:mod:`pipeline.core.ownership`),
so that a re-run continues in it and any other folder is refused. Each piece of work inside is
written atomically; a progress log (JSON Lines, appended and flushed line by line) says what is
done; an interrupted last line is ignored when the log is read back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from pipeline.core.atomic import remove_stale_temporaries
from pipeline.core.ownership import check_output_dir, owner, write_marker

PathLike = Union[str, "os.PathLike[str]"]


def resumable_folder(output: PathLike, command: str, *, inputs: Iterable[Optional[PathLike]] = ()) -> Path:
    """Check ``output`` (absent, empty, or an earlier output of ``command``), make it and mark it."""
    out = check_output_dir(output, command, inputs=inputs)
    out.mkdir(parents=True, exist_ok=True)
    if owner(out) is None:
        write_marker(out, command)
    return out


def read_log(path: PathLike) -> Iterator[dict]:
    """The records of a progress log; a last line cut short by an interruption is skipped."""
    path = Path(path)
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


class ProgressLog:
    """Append-only JSON Lines log, one flushed line per finished piece of work (thread-safe by one writer)."""

    def __init__(self, path: PathLike):
        self.path = Path(path)
        remove_stale_temporaries(self.path)
        self._file = None

    def append(self, record: dict) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
            if self._file.tell() and not self._ends_with_newline():
                self._file.write("\n")  # an interrupted line stays unreadable, the next one starts clean
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

"""The output folder of ``evaluate``: checked before any model runs, marked, resumable.

The folder is created (or resumed) only when it is absent, empty, marked as written by
``evaluate`` (:mod:`pipeline.core.ownership`), or an unmarked folder that holds nothing but what
``evaluate`` writes (results written before the marker existed). Anything else, a file of that
name included, is refused with the path and the fix; so is a folder that is, or lies inside, a
local dataset or model folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pipeline.core.ownership import MARKER, OutputError, check_output_dir, owner, write_marker

from . import results as R
from .shared import CACHE_DIR

COMMAND = "evaluate"
WRITES = {R.RUNS_DIR, R.PREDICTIONS_DIR, R.RESULTS_JSON, R.RESULTS_CSV, R.FIT_PNG, CACHE_DIR, MARKER}


def _written_by_evaluate(folder: Path) -> bool:
    """An unmarked folder holding only evaluate's files, with its runs/ folder (an earlier version's output)."""
    names = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    return (folder / R.RUNS_DIR).is_dir() and names <= WRITES


def _inside(output: Path, folder: str) -> bool:
    source = Path(folder).expanduser().resolve()
    return output == source or source in output.parents


def check_output(output: str, datasets: Sequence = (), models: Sequence = ()) -> Path:
    """Check ``--output`` before the work; the folder as a Path."""
    out = Path(output).expanduser()
    resolved = out.resolve()
    local = [spec.path for spec in datasets if Path(spec.path).exists()]
    local += [m.target for m in models if m.kind == "hf" and Path(m.target).expanduser().exists()]
    for folder in local:
        if _inside(resolved, folder):
            raise OutputError(f"refusing to write results into {output}: it is or lies inside the input {folder}; pass another --output")
    if out.is_dir():
        record = owner(out)
        if record is not None and record.get("command") != COMMAND:
            raise OutputError(
                f"refusing to write results into {output}: it holds the output of `{record.get('command')}`; pass another --output"
            )
        if record is None and _written_by_evaluate(out):
            return out
    check_output_dir(out, COMMAND)
    return out


def prepare_output(output: str, datasets: Sequence = (), models: Sequence = ()) -> Path:
    """:func:`check_output`, then create the folder and mark it as evaluate's."""
    out = check_output(output, datasets, models)
    out.mkdir(parents=True, exist_ok=True)
    if owner(out) is None:
        write_marker(out, COMMAND)
    return out

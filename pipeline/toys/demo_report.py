"""The demo's last step: ``report`` on its own colour classifiers (:mod:`pipeline.evaluation.report`).

The demo scores its classifiers itself (no torch), so it builds rows in ``evaluate``'s format
from the counts (:func:`~pipeline.evaluation.report.result_row`) and bins each image by its
observed selection frequency from the pool (:mod:`pipeline.evaluation.selection_bins`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np


def write_demo_report(
    folder: Path, rows: Sequence[Mapping], correct: Mapping[tuple[str, str], np.ndarray], image_ids: Mapping[str, Sequence[str]],
    pool: Path, *, n_bootstrap: int, echo: Callable[[str], None] = print,
) -> dict:
    """Write ``folder`` (report.json, report.md, figures/) from the demo's rows and per-image correctness.

    ``rows`` are the demo's ``{"classifier", "set", "correct", "total", ...}``; ``correct`` each
    (classifier, set)'s per-image correctness in the order of ``image_ids[set]``.
    """
    from pipeline.evaluation.report import result_row, write_report
    from pipeline.evaluation.report_markdown import table2
    from pipeline.evaluation.selection_bins import read_selection_frequencies, selection_frequency_report

    report_rows = [result_row(r["classifier"], r["set"], "original" if r["set"] == "original" else "new", r["correct"], r["total"])
                   for r in rows]
    frequencies = read_selection_frequencies(Path(pool) / "selection_frequencies.parquet", pool=Path(pool))
    per_image = {key: np.array([frequencies.get(i, np.nan) for i in image_ids[key[1]]]) for key in correct}
    bins = selection_frequency_report(correct, per_image, "original")
    document = write_report(folder, report_rows, selection_bins=bins, n_bootstrap=n_bootstrap)
    echo("")
    echo("report: mean change per set (Table 2)")
    for line in table2(document):
        echo("  " + line)
    return document

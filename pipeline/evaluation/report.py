"""The paper's analysis of an evaluation: per-model changes and ranks, Table 2, fits, effective robustness.

:func:`build_report` takes result rows in ``evaluate``'s format (:data:`.results.COLUMNS`; one
row per model and set, the original set's rows have role ``original``) and returns the
``report.json`` document:

* ``models``: one entry per model and new set: ``model``, ``dataset``, ``original_top1``,
  ``new_top1`` (fractions, with Clopper-Pearson ends), ``top1_change`` (new - original) with
  ``top1_change_ci_low``/``_high``, Newcombe's hybrid score interval for the difference of two
  independent proportions (:func:`.paired.newcombe_difference_interval`), the same for top-5,
  ``rank_original``, ``rank_new`` (1 = best top-1 among the set's models; ties share the best
  rank), ``rank_change`` (``rank_original - rank_new``: positive moved up), ``baseline``, and
  ``effective_robustness`` (new top-1 minus the fitted line's prediction at the model's original
  top-1, mapped back to accuracy, on the scale ``settings.effective_robustness_scale``; every
  scale's value in ``effective_robustness_by_scale``);
* ``sets``: per new set ``n_models``, ``mean_top1_change``, ``mean_top5_change`` and ``fits``,
  the metric's :func:`linear_fit` of new against original top-1 per scale (linear, probit,
  logit) on the baseline models, or ``{"status": "no fit", "reason": ...}``.

:func:`write_report` writes report.json, report.md and the figures (:mod:`.report_figures`).
"""

from __future__ import annotations

import fnmatch
import json
import logging
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from .paired import newcombe_difference_interval, read_results_file

logger = logging.getLogger(__name__)

SCALES = ("linear", "probit", "logit")
INTERVAL = "Newcombe (1998) hybrid score interval for the difference of two independent proportions (method 10)"
REPORT_JSON, REPORT_MD, FIGURES_DIR = "report.json", "report.md", "figures"


def load_results(paths: Iterable[Path]) -> tuple[list[dict], dict[tuple[str, str], Path]]:
    """The rows of one or more results.json files (or their folders), and each row's folder.

    A (model, dataset) pair in several files keeps its last row.
    """
    rows: dict[tuple[str, str], dict] = {}
    folders: dict[tuple[str, str], Path] = {}
    for given in paths:
        folder, file_rows = read_results_file(given)
        for row in file_rows:
            key = (row.get("model"), row.get("dataset"))
            if key in rows:
                logger.warning("%s on %s is in more than one results file; keeping the one in %s", *key, folder)
            rows[key], folders[key] = row, folder
    return list(rows.values()), folders


def result_row(model: str, dataset: str, role: str, correct: int, total: int, top5_correct: Optional[int] = None,
               confidence_level: float = 0.95) -> dict:
    """A result row in ``evaluate``'s format from raw counts: the entry point for scores made elsewhere.

    >>> row = result_row("m", "cifar10@test", "original", 9_000, 10_000)
    >>> row["top1_accuracy"], round(row["top1_ci_low"], 4), row["top5_correct"]
    (0.9, 0.894, None)
    """
    from metrics.clopper_pearson_accuracy.clopper_pearson_accuracy import (
        clopper_pearson_interval,
    )

    from .results import make_row

    if role not in ("original", "new"):
        raise ValueError(f"role must be 'original' or 'new'; got {role!r}")
    values = {"model": model, "source": "", "dataset": dataset, "dataset_spec": dataset, "role": role, "status": "ok", "error": "",
              "total": total, "confidence_level": confidence_level}
    for k, count in ((1, correct), (5, top5_correct)):
        if count is not None:
            low, high = clopper_pearson_interval(count, total, confidence_level)
            values |= {f"top{k}_correct": count, f"top{k}_accuracy": count / total, f"top{k}_ci_low": low, f"top{k}_ci_high": high}
    return make_row(**values)


def split_roles(rows: Sequence[Mapping]) -> tuple[str, list[str]]:
    """The original dataset and the new datasets (in first-seen order) of the rows."""
    originals = list(dict.fromkeys(r["dataset"] for r in rows if r.get("role") == "original"))
    if len(originals) != 1:
        raise ValueError(
            f"the results hold {len(originals)} original datasets ({originals}); a report compares new sets with one "
            f"original: pass results.json files of evaluations with the same --original"
        )
    new = list(dict.fromkeys(r["dataset"] for r in rows if r.get("role") != "original"))
    if not new:
        raise ValueError("the results hold no new dataset (rows with role 'new'); evaluate with --new first")
    return originals[0], new


def baseline_flags(models: Sequence[str], baseline) -> list[bool]:
    """Which models the lines are fitted to: all (``None``), a glob pattern, a set of names, or a predicate.

    >>> baseline_flags(["resnet50", "vit_b16", "resnet18"], "resnet*")
    [True, False, True]
    """
    if baseline is None:
        return [True] * len(models)
    if isinstance(baseline, str):
        flags = [fnmatch.fnmatchcase(m, baseline) for m in models]
        if not any(flags):
            raise ValueError(f"--baseline {baseline!r} matches none of the models {list(models)}; pass a glob pattern "
                             f"(case-sensitive, * and ? wildcards) that matches the standard models' names")
        return flags
    if callable(baseline):
        return [bool(baseline(m)) for m in models]
    names = set(baseline)
    return [m in names for m in models]


def _ranks(values: Sequence[float]) -> list[int]:
    """1 = highest; equal values share the best rank (1, 2, 2, 4)."""
    values = np.asarray(values, float)
    return [int(1 + np.sum(values > v)) for v in values]


def _accuracy(row: Mapping, k: int) -> Optional[dict]:
    if row.get(f"top{k}_correct") is None:
        return None
    return {
        "correct": int(row[f"top{k}_correct"]), "total": int(row["total"]), "accuracy": float(row[f"top{k}_accuracy"]),
        "ci_low": float(row[f"top{k}_ci_low"]), "ci_high": float(row[f"top{k}_ci_high"]),
    }


def _change_fields(original: Mapping, new: Mapping, k: int, confidence_level: float) -> dict:
    a, b = _accuracy(original, k), _accuracy(new, k)
    fields = {f"original_top{k}": None, f"original_top{k}_ci_low": None, f"original_top{k}_ci_high": None,
              f"new_top{k}": None, f"new_top{k}_ci_low": None, f"new_top{k}_ci_high": None,
              f"top{k}_change": None, f"top{k}_change_ci_low": None, f"top{k}_change_ci_high": None}
    if a is None or b is None:
        return fields
    low, high = newcombe_difference_interval(b["correct"], b["total"], a["correct"], a["total"], confidence_level)
    return fields | {
        f"original_top{k}": a["accuracy"], f"original_top{k}_ci_low": a["ci_low"], f"original_top{k}_ci_high": a["ci_high"],
        f"new_top{k}": b["accuracy"], f"new_top{k}_ci_low": b["ci_low"], f"new_top{k}_ci_high": b["ci_high"],
        f"top{k}_change": b["accuracy"] - a["accuracy"], f"top{k}_change_ci_low": low, f"top{k}_change_ci_high": high,
    }


def fit_set(original: Sequence[float], new: Sequence[float], flags: Sequence[bool], *, n_bootstrap: int, seed: int) -> dict:
    """Per scale, the metric's linear fit on the flagged models (evaluated on all), or the reason there is none."""
    from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

    fits = {}
    for scale in SCALES:
        if sum(flags) < 3:
            fits[scale] = {"status": "no fit", "reason": f"a fit needs at least 3 baseline models with results on both sets; {sum(flags)} have"}
            continue
        try:
            fit = cpa.linear_fit(list(original), list(new), scale=scale, n_bootstrap=n_bootstrap, seed=seed, baseline=list(flags))
        except ValueError as e:
            fits[scale] = {"status": "no fit", "reason": str(e)}
            continue
        fits[scale] = {"status": "ok", **fit}
    return fits


def _set_entries(ok: Mapping, original: str, new: str, models: list[str], baseline, settings: Mapping) -> tuple[dict, list[dict]]:
    flags = baseline_flags(models, baseline)
    x = [ok[(m, original)]["top1_accuracy"] for m in models]
    y = [ok[(m, new)]["top1_accuracy"] for m in models]
    fits = fit_set(x, y, flags, n_bootstrap=settings["n_bootstrap"], seed=settings["seed"])
    rank_x, rank_y = _ranks(x), _ranks(y)
    entries = []
    for i, m in enumerate(models):
        by_scale = {s: (f["effective_robustness"][i] if f["status"] == "ok" else None) for s, f in fits.items()}
        entry = {"model": m, "dataset": new}
        for k in (1, 5):
            entry |= _change_fields(ok[(m, original)], ok[(m, new)], k, settings["confidence_level"])
        entry |= {"rank_original": rank_x[i], "rank_new": rank_y[i], "rank_change": rank_x[i] - rank_y[i], "baseline": flags[i],
                  "effective_robustness": by_scale[settings["effective_robustness_scale"]], "effective_robustness_by_scale": by_scale}
        entries.append(entry)
    top5 = [e["top5_change"] for e in entries if e["top5_change"] is not None]
    summary = {
        "n_models": len(models), "n_baseline": int(sum(flags)),
        "mean_top1_change": float(np.mean([e["top1_change"] for e in entries])) if entries else None,
        "mean_top5_change": float(np.mean(top5)) if top5 and len(top5) == len(entries) else None,
        "fits": fits,
    }
    return summary, entries


def build_report(
    rows: Sequence[Mapping],
    *,
    baseline=None,
    n_bootstrap: int = 100_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    effective_robustness_scale: str = "logit",
) -> dict:
    """The report.json document of result rows in ``evaluate``'s format (see the module docstring).

    ``baseline``: ``None`` (fit all models), a glob pattern of model names, a set of names, or a
    predicate on the name.
    """
    if effective_robustness_scale not in SCALES:
        raise ValueError(f"effective_robustness_scale must be one of {SCALES}; got {effective_robustness_scale!r}")
    original, new_sets = split_roles(rows)
    ok = {(r["model"], r["dataset"]): r for r in rows if r.get("status") == "ok"}
    failed = sorted({f"{r['model']} on {r['dataset']}" for r in rows if r.get("status") != "ok"})
    settings = {"n_bootstrap": n_bootstrap, "seed": seed, "confidence_level": confidence_level,
                "effective_robustness_scale": effective_robustness_scale,
                "baseline": baseline if baseline is None or isinstance(baseline, str) else sorted(baseline) if not callable(baseline) else "custom",
                "change_interval": INTERVAL, "accuracy_interval": "Clopper-Pearson (exact)", "original": original}
    order = list(dict.fromkeys(r["model"] for r in rows))
    sets, models = {}, []
    for new in new_sets:
        paired = [m for m in order if (m, original) in ok and (m, new) in ok]
        sets[new], entries = _set_entries(ok, original, new, paired, baseline, settings)
        models.extend(entries)
    return {"original": original, "sets": sets, "models": models, "failed": failed, "settings": settings}


def write_report(
    output: Path,
    rows: Sequence[Mapping],
    *,
    selection_bins: Optional[dict] = None,
    figures: bool = True,
    inputs: Sequence[Path] = (),
    **options,
) -> dict:
    """Write report.json, report.md and the figures into ``output`` (a folder this writes and owns).

    ``output`` must be absent, empty or an earlier report (:mod:`pipeline.core.ownership`) and
    must not be or hold one of ``inputs``. ``selection_bins`` is
    :func:`.selection_bins.selection_frequency_report`'s result, if any. Returns the report
    document (with ``files``: the paths written, relative to ``output``).
    """
    from pipeline.core.ownership import check_output_dir, owned_directory

    from . import report_figures, report_markdown

    check_output_dir(output, "report", inputs=inputs)
    document = build_report(rows, **options)
    if selection_bins is not None:
        document["selection_frequency_bins"] = selection_bins
    with owned_directory(Path(output), "report", inputs=inputs) as tmp:
        files = report_figures.write_figures(tmp / FIGURES_DIR, rows, document) if figures else []
        document["files"] = [REPORT_JSON, REPORT_MD] + [f"{FIGURES_DIR}/{name}" for name in files]
        (tmp / REPORT_MD).write_text(report_markdown.render(document), encoding="utf-8")
        (tmp / REPORT_JSON).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document

"""report.md: the report document (:mod:`.report`) as Markdown tables.

Accuracies and changes are shown in percent (the document keeps fractions).
"""

from __future__ import annotations

from typing import Mapping, Optional


def _pct(value: Optional[float], signed: bool = False, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{100 * value:+.{digits}f}" if signed else f"{100 * value:.{digits}f}"


def _with_interval(value, low, high, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{_pct(value, signed)} [{_pct(low, signed)}, {_pct(high, signed)}]"


def _number(value: Optional[float], digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table2(document: Mapping) -> list[str]:
    """Table 2 of the paper: per new set, the number of models and the mean change."""
    lines = [
        "| new set | models | mean top-1 change (points) | mean top-5 change (points) |",
        "|---|---:|---:|---:|",
    ]
    for name, s in document["sets"].items():
        lines.append(f"| {name} | {s['n_models']} | {_pct(s['mean_top1_change'], True, 2)} | {_pct(s['mean_top5_change'], True, 2)} |")
    return lines


def fits_table(document: Mapping) -> list[str]:
    lines = ["| new set | scale | slope [95% CI] | intercept [95% CI] | r² | models fitted |", "|---|---|---|---|---:|---:|"]
    for name, s in document["sets"].items():
        for scale, fit in s["fits"].items():
            if fit.get("status") != "ok":
                lines.append(f"| {name} | {scale} | no fit: {fit.get('reason', '')} | | | |")
                continue
            slope = f"{fit['slope']:.3f}" + (f" [{fit['slope_ci_low']:.3f}, {fit['slope_ci_high']:.3f}]" if fit["slope_ci_low"] is not None else "")
            intercept = f"{fit['intercept']:.3f}" + (
                f" [{fit['intercept_ci_low']:.3f}, {fit['intercept_ci_high']:.3f}]" if fit["intercept_ci_low"] is not None else ""
            )
            lines.append(f"| {name} | {scale} | {slope} | {intercept} | {fit['r2']:.3f} | {fit['n_models']} |")
    return lines


def models_table(document: Mapping, dataset: str) -> list[str]:
    scale = document["settings"]["effective_robustness_scale"]
    lines = [
        f"| model | original top-1 | new top-1 | change [95% CI] | original top-5 | new top-5 | rank orig. | rank new | Δ rank | "
        f"effective robustness ({scale}) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in document["models"]:
        if e["dataset"] != dataset:
            continue
        name = e["model"] + ("" if e["baseline"] else " (not in the baseline)")
        lines.append(
            f"| {name} | {_with_interval(e['original_top1'], e['original_top1_ci_low'], e['original_top1_ci_high'])} "
            f"| {_with_interval(e['new_top1'], e['new_top1_ci_low'], e['new_top1_ci_high'])} "
            f"| {_with_interval(e['top1_change'], e['top1_change_ci_low'], e['top1_change_ci_high'], True)} "
            f"| {_pct(e['original_top5'])} | {_pct(e['new_top5'])} "
            f"| {e['rank_original']} | {e['rank_new']} | {e['rank_change']:+d} | {_pct(e['effective_robustness'], True, 2)} |"
        )
    return lines


def selection_table(bins: Mapping) -> list[str]:
    edges = bins["edges"]
    labels = [f"[{lo:g}, {hi:g})" for lo, hi in zip([0.0, *edges], [*edges, 1.0])]
    labels[-1] = labels[-1].replace(")", "]")
    lines = [
        "| model | images | " + " | ".join(f"SF {label}" for label in labels) + " |",
        "|---|---|" + "---:|" * len(labels),
    ]
    for entry in bins["models"]:
        cells = [
            "–" if b["total"] == 0 else f"{_pct(b['accuracy'])} [{_pct(b['ci_low'])}, {_pct(b['ci_high'])}] (n={b['total']})"
            for b in entry["bins"]
        ]
        lines.append(f"| {entry['model']} | {entry['dataset']} | " + " | ".join(cells) + " |")
    return lines


def render(document: Mapping) -> str:
    """The whole report.md."""
    settings = document["settings"]
    out = [
        "# Evaluation report",
        "",
        f"Original set: `{document['original']}`. Accuracies in percent with exact 95% Clopper–Pearson intervals; "
        f"changes are new − original, with the {settings['change_interval']}. Ranks: 1 = best top-1 among the "
        f"set's models; Δ rank = original rank − new rank (positive: moved up). Effective robustness: new top-1 minus "
        f"the {settings['effective_robustness_scale']} fit's prediction at the model's original top-1, in points "
        f"(Taori et al. 2020); the lines are fitted to "
        + ("all models." if settings["baseline"] is None else f"the baseline models ({settings['baseline']}) and evaluated on all."),
        "",
        "## Mean change per new set (Table 2)",
        "",
        *table2(document),
        "",
        "## Fits of new against original top-1 accuracy",
        "",
        f"Least squares on each scale, {settings['n_bootstrap']:,} bootstrap resamples of the models for the intervals; "
        "slope and intercept are in the units of the scale (fractions for linear).",
        "",
        *fits_table(document),
    ]
    for dataset in document["sets"]:
        out += ["", f"## {dataset}", "", *models_table(document, dataset)]
    if document.get("selection_frequency_bins"):
        out += ["", "## Accuracy by selection frequency", "",
                "Top-1 accuracy per selection-frequency bin (as MatchedFrequency bins them), originals and new images alike.", "",
                *selection_table(document["selection_frequency_bins"])]
    if document.get("failed"):
        out += ["", "Results that failed and are left out: " + "; ".join(document["failed"]) + "."]
    if document.get("files"):
        figures = [f for f in document["files"] if f.endswith(".png")]
        out += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    return "\n".join(out) + "\n"

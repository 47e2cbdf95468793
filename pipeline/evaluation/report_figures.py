"""The report's figures, from the report document (:mod:`.report`).

* ``fit-<set>.png``: Figure 1 of Recht et al. (2019) for one new set: each model's original
  against new top-1 accuracy with its Clopper–Pearson bars on both axes, the fitted line and
  y = x; left panel on linear axes, right panel on probit axes (tick labels in accuracy).
  Models are labelled when there are at most :data:`LABEL_AT_MOST`; with many models markers
  shrink and bars thin, so 300 models stay readable. Models outside the baseline are hollow.
* ``mean-change.png``: Table 2 as bars: the mean top-1 (and top-5) change per new set.
* ``selection-frequency.png``: top-1 accuracy per selection-frequency bin, originals and new
  images (Figures 15-17 of the paper), when the report has selection frequencies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .results import slug

LABEL_AT_MOST = 12
MIN_BIN_IMAGES = 10  # selection-frequency bins with fewer images are left out of the figure (the table keeps them)
ACCURACY_TICKS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    from pipeline.core.atomic import atomic_file

    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)


def _style(n: int) -> dict:
    """Marker size, bar width and transparency for ``n`` points."""
    if n <= 20:
        return {"ms": 5, "lw": 0.9, "alpha": 0.9, "capsize": 2}
    if n <= 80:
        return {"ms": 3.5, "lw": 0.6, "alpha": 0.7, "capsize": 0}
    return {"ms": 2.2, "lw": 0.35, "alpha": 0.45, "capsize": 0}


def _limits(entries: Sequence[Mapping]) -> tuple[float, float]:
    ends = [e[k] for e in entries for k in ("original_top1_ci_low", "original_top1_ci_high", "new_top1_ci_low", "new_top1_ci_high")]
    lo, hi = min(ends) - 0.03, max(ends) + 0.03
    if hi - lo < 0.1:
        middle = (hi + lo) / 2
        lo, hi = middle - 0.05, middle + 0.05
    return max(0.002, lo), min(0.998, hi)


def _points(ax, entries: Sequence[Mapping], transform, colour: str) -> None:
    style = _style(len(entries))
    for baseline in (True, False):
        group = [e for e in entries if e["baseline"] is baseline]
        if not group:
            continue
        x = np.array([e["original_top1"] for e in group])
        y = np.array([e["new_top1"] for e in group])
        tx, ty = transform(x), transform(y)
        xerr = [tx - transform(np.array([e["original_top1_ci_low"] for e in group])),
                transform(np.array([e["original_top1_ci_high"] for e in group])) - tx]
        yerr = [ty - transform(np.array([e["new_top1_ci_low"] for e in group])),
                transform(np.array([e["new_top1_ci_high"] for e in group])) - ty]
        ax.errorbar(tx, ty, xerr=xerr, yerr=yerr, fmt="o", ms=style["ms"], lw=style["lw"], capsize=style["capsize"],
                    alpha=style["alpha"], color=colour, mfc=colour if baseline else "white",
                    label="models (95% Clopper–Pearson)" if baseline else "models outside the baseline")
    if len(entries) <= LABEL_AT_MOST:
        for e in entries:
            ax.annotate(e["model"], (transform(np.array([e["original_top1"]]))[0], transform(np.array([e["new_top1"]]))[0]),
                        xytext=(4, -9), textcoords="offset points", fontsize=7, color="0.25")


def _panel(ax, entries, fits: Mapping, scale: str, original: str, dataset: str) -> None:
    from scipy.special import ndtr, ndtri

    lo, hi = _limits(entries)
    transform = (lambda a: np.asarray(a, float)) if scale == "linear" else (lambda a: ndtri(np.clip(np.asarray(a, float), 1e-6, 1 - 1e-6)))
    grid = np.linspace(transform(np.array([lo]))[0], transform(np.array([hi]))[0], 200)
    ax.plot(grid, grid, "k--", lw=1, label="y = x")
    _points(ax, entries, transform, "C0")
    fit = fits.get(scale, {})
    if fit.get("status") == "ok":
        ax.plot(grid, fit["slope"] * grid + fit["intercept"], "C1-", lw=1.6,
                label=f"{scale} fit: slope {fit['slope']:.2f}, r² {fit['r2']:.2f} ({fit['n_models']} models)")
    else:
        ax.text(0.03, 0.97, f"no {scale} fit: {fit.get('reason', '')}"[:90], transform=ax.transAxes, va="top", fontsize=7)
    if scale == "linear" and fits.get("probit", {}).get("status") == "ok":
        p = fits["probit"]
        ax.plot(grid, ndtr(p["slope"] * ndtri(np.clip(grid, 1e-6, 1 - 1e-6)) + p["intercept"]), "C2:", lw=1.4, label="probit fit")
    ax.set_xlim(grid[0], grid[-1])
    ax.set_ylim(grid[0], grid[-1])
    if scale == "probit":
        ticks = [t for t in ACCURACY_TICKS if lo <= t <= hi] or [lo, hi]
        ax.set_xticks(ndtri(ticks), [f"{100 * t:g}" for t in ticks])
        ax.set_yticks(ndtri(ticks), [f"{100 * t:g}" for t in ticks])
    else:
        ax.xaxis.set_major_formatter(lambda v, _: f"{100 * v:g}")
        ax.yaxis.set_major_formatter(lambda v, _: f"{100 * v:g}")
    ax.set_aspect("equal")
    ax.set_title(f"{scale} axes", fontsize=9)
    ax.set_xlabel(f"top-1 accuracy on {original} (%)", fontsize=8)
    ax.set_ylabel(f"top-1 accuracy on {dataset} (%)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=6.5)


def plot_fit(path: Path, document: Mapping, dataset: str) -> Path:
    """Figure 1 for one new set: linear and probit axes side by side."""
    plt = _pyplot()
    entries = [e for e in document["models"] if e["dataset"] == dataset]
    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, scale in zip(axes, ("linear", "probit")):
        if entries:
            _panel(ax, entries, document["sets"][dataset]["fits"], scale, document["original"], dataset)
    fig.suptitle(f"{dataset}: {len(entries)} models", fontsize=10)
    fig.tight_layout()
    _save(fig, Path(path))
    plt.close(fig)
    return Path(path)


def plot_mean_change(path: Path, document: Mapping) -> Path:
    """Table 2 as a bar chart: mean top-1 and top-5 change (points) per new set."""
    plt = _pyplot()
    names = list(document["sets"])
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(names) + 2), 3.6))
    x = np.arange(len(names))
    for offset, k, colour in ((-0.2, 1, "C0"), (0.2, 5, "C1")):
        values = [document["sets"][n][f"mean_top{k}_change"] for n in names]
        heights = [100 * v if v is not None else 0.0 for v in values]
        bars = ax.bar(x + offset, heights, width=0.38, color=colour, label=f"top-{k}")
        for bar, v in zip(bars, values):
            text = "–" if v is None else f"{100 * v:+.1f}"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="top" if bar.get_height() < 0 else "bottom", fontsize=7, xytext=(0, -2 if bar.get_height() < 0 else 2),
                        textcoords="offset points")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, [f"{n}\n({document['sets'][n]['n_models']} models)" for n in names], fontsize=7)
    ax.set_ylabel("mean change, new − original (points)", fontsize=8)
    ax.set_title(f"mean accuracy change against {document['original']}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    _save(fig, Path(path))
    plt.close(fig)
    return Path(path)


def plot_selection_frequency(path: Path, bins: Mapping) -> Path:
    """Accuracy per selection-frequency bin: one panel per new set, originals dashed, new images solid."""
    plt = _pyplot()
    sets = bins["new_sets"]
    fig, axes = plt.subplots(1, max(1, len(sets)), figsize=(4.6 * max(1, len(sets)), 3.8), squeeze=False)
    centres = np.arange(len(bins["edges"]) + 1)
    labels = [f"{lo:g}–{hi:g}" for lo, hi in zip([0.0, *bins["edges"]], [*bins["edges"], 1.0])]
    for ax, dataset in zip(axes[0], sets):
        models = list(dict.fromkeys(e["model"] for e in bins["models"] if e["dataset"] == dataset))
        many = len(models) > 8
        for i, model in enumerate(models):
            for role, style in ((bins["original"], "--"), (dataset, "-")):
                entry = next((e for e in bins["models"] if e["model"] == model and e["dataset"] == role), None)
                if entry is None:
                    continue
                acc = np.array([b["accuracy"] if b["total"] >= MIN_BIN_IMAGES else np.nan for b in entry["bins"]])
                ax.plot(centres, 100 * acc, style, marker="o", ms=2 if many else 4, lw=0.5 if many else 1.2,
                        color="0.6" if many else f"C{i % 10}", alpha=0.5 if many else 1.0,
                        label=None if many else f"{model} ({'original' if role == bins['original'] else 'new'})")
        ax.set_xticks(centres, labels, fontsize=7)
        ax.set_xlabel("selection frequency bin", fontsize=8)
        ax.set_ylabel("top-1 accuracy (%)", fontsize=8)
        ax.set_title(f"{dataset} (solid) and {bins['original']} (dashed); bins of ≥ {MIN_BIN_IMAGES} images", fontsize=8)
        ax.grid(alpha=0.3)
        if not many:
            ax.legend(fontsize=6)
    fig.tight_layout()
    _save(fig, Path(path))
    plt.close(fig)
    return Path(path)


def write_figures(folder: Path, rows: Sequence[Mapping], document: Mapping) -> list[str]:
    """Every figure of the report into ``folder``; returns their file names."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for dataset in document["sets"]:
        name = f"fit-{slug(dataset)}.png"
        plot_fit(folder / name, document, dataset)
        names.append(name)
    plot_mean_change(folder / "mean-change.png", document)
    names.append("mean-change.png")
    if document.get("selection_frequency_bins"):
        plot_selection_frequency(folder / "selection-frequency.png", document["selection_frequency_bins"])
        names.append("selection-frequency.png")
    return names

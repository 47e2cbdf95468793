"""fit.png: new against original top-1 accuracy, as in Figure 1 of Recht et al. (2019).

One panel per new dataset: each model a point with its Clopper–Pearson interval bars on both
axes, the linear fit across models (and the probit fit mapped back, dotted), and y = x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from pipeline.core.atomic import atomic_file

from .results import paired_accuracies


def plot_fits(path: Path, rows: Sequence[Mapping], original: str, new_datasets: Sequence[str], fits: Mapping) -> Path:
    """Draw the figure and write it atomically as PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from scipy.special import ndtr, ndtri

    ok = {(r["model"], r["dataset"]): r for r in rows if r.get("status") == "ok"}
    panels = max(1, len(new_datasets))
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 5), squeeze=False)
    for ax, new in zip(axes[0], new_datasets or [""]):
        models, x, y = paired_accuracies(rows, original, new) if new else ([], [], [])
        x, y = np.asarray(x, float) * 100, np.asarray(y, float) * 100
        ends = [100 * ok[(m, d)][f"top1_ci_{e}"] for m in models for d in (original, new) for e in ("low", "high")]
        lo, hi = max(0.0, min(ends, default=0.0) - 3), min(100.0, max(ends, default=100.0) + 3)
        if hi - lo < 10:
            lo, hi = max(0.0, lo - 5), min(100.0, hi + 5)
        grid = np.linspace(lo, hi, 200)
        ax.plot(grid, grid, "k--", lw=1, label="y = x")
        if models:
            xerr = [[100 * (ok[(m, original)]["top1_accuracy"] - ok[(m, original)]["top1_ci_low"]) for m in models],
                    [100 * (ok[(m, original)]["top1_ci_high"] - ok[(m, original)]["top1_accuracy"]) for m in models]]
            yerr = [[100 * (ok[(m, new)]["top1_accuracy"] - ok[(m, new)]["top1_ci_low"]) for m in models],
                    [100 * (ok[(m, new)]["top1_ci_high"] - ok[(m, new)]["top1_accuracy"]) for m in models]]
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=4, capsize=2, lw=0.8, label="models (95% CI)")
        fit = fits.get(new, {}).get("linear", {})
        if fit.get("status") == "ok":
            ax.plot(grid, fit["slope"] * grid + 100 * fit["intercept"], "C1-", lw=1.5,
                    label=f"linear fit: slope {fit['slope']:.2f}, r² {fit['r2']:.2f}")
        probit = fits.get(new, {}).get("probit", {})
        if probit.get("status") == "ok":
            inner = np.clip(grid / 100, 1e-6, 1 - 1e-6)
            ax.plot(grid, 100 * ndtr(probit["slope"] * ndtri(inner) + probit["intercept"]), "C2:", lw=1.5, label="probit fit")
        if fit.get("status") != "ok":
            reason = fit.get("reason", "no new dataset")
            ax.text(0.03, 0.97, f"no fit: {reason}", transform=ax.transAxes, va="top", fontsize=7, wrap=True)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel(f"top-1 accuracy on {original} (%)")
        ax.set_ylabel(f"top-1 accuracy on {new} (%)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    path = Path(path)
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=120)
    plt.close(fig)
    return path

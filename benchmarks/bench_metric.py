"""Time the vectorised bootstrap of ``linear_fit`` against a loop of ``numpy.polyfit``.

100,000 resamples over 64 models (synthetic accuracies around the paper's ImageNet line,
new = 1.11 * original - 0.202). The reference loop fits one resample at a time with
``numpy.polyfit``; it is timed on the first ``--loop-resamples`` resamples (5,000 by default)
and scaled up linearly to the full count, which the output says. The loop draws its indices
from the same PCG64 stream as the vectorised code, so the two must give the same slopes; the
largest difference is printed too. Peak memory of the vectorised run is measured separately
with ``tracemalloc`` (numpy reports its buffers to it), since tracing slows the run. Wall
times are the best of ``--repeats`` runs (3 by default) of each.

Run: ``python benchmarks/bench_metric.py`` (targets: ratio >= 20, vectorised < 1 s).
"""

import argparse
import time
import tracemalloc

import numpy as np

from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa


def synthetic_models(n_models, seed=0):
    """Original and new accuracies of ``n_models`` made-up models near the paper's line."""
    rng = np.random.default_rng(seed)
    original = rng.uniform(0.55, 0.85, n_models)
    new = np.clip(1.11 * original - 0.202 + rng.normal(0, 0.01, n_models), 0, 1)
    return original, new


def polyfit_loop(x, y, n_resamples, seed):
    """Slopes of ``n_resamples`` resamples, one ``numpy.polyfit`` each, same draws as ``cpa``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(x)
    slopes = np.empty(n_resamples)
    for i in range(n_resamples):
        index = (rng.random(n) * n).astype(np.intp)
        slopes[i] = np.polyfit(x[index], y[index], 1)[0]
    return slopes


def best_of(repeats, function, *args, **kwargs):
    """``function``'s result and its shortest wall time over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return result, min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--resamples", type=int, default=100_000)
    parser.add_argument("--loop-resamples", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="report the best of this many runs")
    args = parser.parse_args()
    original, new = synthetic_models(args.models, args.seed)

    cpa.linear_fit(original, new, n_bootstrap=1_000, seed=args.seed)  # warm-up
    fit, vectorised_s = best_of(
        args.repeats, cpa.linear_fit, original, new, n_bootstrap=args.resamples, seed=args.seed
    )
    loop_n = min(args.loop_resamples, args.resamples)
    loop_slopes, loop_measured_s = best_of(
        args.repeats, polyfit_loop, original, new, loop_n, args.seed
    )
    loop_s = loop_measured_s * args.resamples / loop_n

    slopes, _ = cpa._bootstrap(original, new, loop_n, args.seed)
    max_difference = float(np.max(np.abs(slopes - loop_slopes)))

    tracemalloc.start()
    cpa.linear_fit(original, new, n_bootstrap=args.resamples, seed=args.seed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(
        f"linear_fit bootstrap: {args.resamples:,} resamples over {args.models} models "
        f"(wall times: best of {args.repeats} runs)"
    )
    print(f"  vectorised (chunks of <= {cpa._MAX_CHUNK_ENTRIES:,} entries): {vectorised_s:.3f} s")
    print(
        f"  numpy.polyfit loop: {loop_measured_s:.3f} s measured on {loop_n:,} resamples, "
        f"scaled linearly to {args.resamples:,}: {loop_s:.2f} s"
    )
    print(f"  ratio (loop / vectorised): {loop_s / vectorised_s:.1f}x  (target >= 20x)")
    print(f"  vectorised under 1 s: {'yes' if vectorised_s < 1 else 'NO'}")
    print(f"  peak traced memory of the vectorised run: {peak / 2**20:.1f} MiB")
    print(f"  same resamples, largest slope difference vectorised vs polyfit: {max_difference:.2e}")
    print(
        f"  fit: slope {fit['slope']:.4f} [{fit['slope_ci_low']:.4f}, {fit['slope_ci_high']:.4f}], "
        f"intercept {fit['intercept']:.4f} [{fit['intercept_ci_low']:.4f}, "
        f"{fit['intercept_ci_high']:.4f}]"
    )


if __name__ == "__main__":
    main()

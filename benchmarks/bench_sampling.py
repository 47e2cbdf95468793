"""Time ``selection-frequency`` plus the three sampling rules on a pool the size of ImageNetV2's.

The pool: 208,000 candidates over 1,000 classes (208 each) and 50 originals per class, in
tasks of 40 candidates + 4 positive + 3 negative controls done by 10 workers each, so every
candidate has 10 annotations (2.4 million annotation rows). It is generated with
:mod:`pipeline.toys.synthetic_pool` and written as a pool folder first (not timed). The timed run is
the stages as the commands run them, files in and out: ``selection_frequency_stage`` and
``sample_stage`` for matched-frequency, threshold-0.7 and top-images.

Memory: each size runs in a fresh process; the figure is the peak resident memory of the
timed run (reading the tables included) above the memory after the imports, at two pool sizes,
so that the ratio shows how it grows with the pool (linear: 4x the pool, at most about 4x the
memory; fixed costs make the ratio smaller).

Run: ``python benchmarks/bench_sampling.py`` (target: the whole timed run < 10 s at 208,000).
"""

import argparse
import json
import multiprocessing
import resource
import tempfile
import time
from pathlib import Path


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def shape_for(candidates_per_class: int):
    from pipeline.toys.synthetic_pool import PoolShape

    return PoolShape(
        n_classes=1000, candidates_per_class=candidates_per_class, originals_per_class=50, positive_controls=4,
        negative_controls=3, grid=40, annotators=10, workers=2000, spammer_fraction=0.0, rejected_fraction=0.0,
    )


def prepare(folder: str, candidates_per_class: int) -> dict:
    """Generate the pool and ingest-equivalent tables into ``folder`` (not timed)."""
    from pipeline.rebuild.ingest import POOL_FILES
    from pipeline.toys.synthetic_pool import make_synthetic_pool
    from pipeline.rebuild.tables import from_rows, write_table

    pool = make_synthetic_pool(0, shape_for(candidates_per_class))
    root = Path(folder)
    annotations = pool.annotations()
    write_table(pool.candidates_table(), root / POOL_FILES["candidates"])
    write_table(pool.originals_table(), root / POOL_FILES["originals"])
    write_table(annotations, root / POOL_FILES["annotations"])
    write_table(from_rows([], "images"), root / POOL_FILES["images"])
    return {"candidates": len(pool.candidate_ids), "annotation_rows": annotations.num_rows}


def timed_run(folder: str, queue) -> None:
    """In a fresh process: load, then time the stages; report time and memory."""
    import pyarrow as pa

    from pipeline.rebuild.ingest import load_pool
    from pipeline.rebuild.revision import SamplingConfig
    from pipeline.rebuild.sample import sample_stage
    from pipeline.rebuild.selection_frequency import selection_frequency_stage

    load_pool(folder, ("candidates",))  # warm the imports; the stages read the tables themselves
    base = rss_mib()
    times = {}
    start = time.perf_counter()
    selection_frequency_stage(folder)
    times["selection-frequency"] = time.perf_counter() - start
    reports = {}
    for rule in ("matched-frequency", "threshold-0.7", "top-images"):
        t = time.perf_counter()
        out = sample_stage(folder, Path(folder) / f"{rule}.json", SamplingConfig(rule=rule, seed=0))
        times[rule] = time.perf_counter() - t
        reports[rule] = {"images": out.report["images"], "is_valid": out.report["is_valid"]}
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"times": times, "total": total, "extra_mib": peak - base, "arrow_peak_mib": pa.default_memory_pool().max_memory() / 2**20, "reports": reports})


def run_size(candidates_per_class: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        context = multiprocessing.get_context("spawn")
        with context.Pool(1) as workers:
            sizes = workers.apply(prepare, (folder, candidates_per_class))
        queue = context.Queue()
        process = context.Process(target=timed_run, args=(folder, queue))
        process.start()
        result = queue.get()
        process.join()
    return sizes | result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates-per-class", type=int, default=208)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    small = run_size(max(1, args.candidates_per_class // 4))
    full = run_size(args.candidates_per_class)
    for label, r in (("quarter pool", small), ("full pool", full)):
        print(f"{label}: {r['candidates']:,} candidates, {r['annotation_rows']:,} annotation rows")
        for stage, seconds in r["times"].items():
            print(f"  {stage:<20} {seconds:6.2f} s")
        print(f"  {'total':<20} {r['total']:6.2f} s  = {r['candidates'] / r['total']:,.0f} candidates/s, "
              f"{r['annotation_rows'] / r['total']:,.0f} annotation rows/s")
        print(f"  peak memory above the imports: {r['extra_mib']:.0f} MiB (Arrow pool peak {r['arrow_peak_mib']:.0f} MiB)")
        print(f"  revisions: {r['reports']}")
    ratio = full["extra_mib"] / max(small["extra_mib"], 1e-9)
    print(f"memory ratio full / quarter pool: {ratio:.2f} (pool ratio {full['candidates'] / small['candidates']:.2f})")
    print(f"target: full run < 10 s: {'met' if full['total'] < 10 else 'NOT met'} ({full['total']:.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"quarter": small, "full": full}, indent=2))


if __name__ == "__main__":
    main()

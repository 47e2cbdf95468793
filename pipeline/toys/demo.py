"""``python -m pipeline demo``: a whole rebuild, offline, on a synthetic pool.

The same stage functions a real rebuild uses, in order:

1. inputs: a synthetic pool for the 1,000 ImageNet classes (:mod:`pipeline.toys.synthetic_pool`):
   candidate records (JSON Lines), original validation images (CSV of labels + JPEGs), small
   JPEGs for every image, a blacklist, confirmed near-duplicate pairs and a near-duplicate review table;
2. the crowd round trip: ``tasks`` (grids with hidden controls), simulated workers answering them
   as an MTurk batch-results CSV (:mod:`pipeline.toys.annotators`), ``ingest --tasks`` → pool
   folder; 3. ``selection-frequency`` (dropping workers who fail the
   controls); 4. ``sample`` by the three rules, then a simulated final review blacklists some
   chosen images and each rule samples a second revision chained from the first;
5. ``build-set`` → release-layout tars and a Hub-ready folder, through the ImageNetV2 builder;
6. ``load_dataset`` on that folder; 7. a few nearest-colour classifiers of different strength
   are evaluated on the originals and on each new set with the Clopper–Pearson metric
   (accuracies with exact intervals, the linear fit of new against original accuracy);
8. a printed table, ``results.json`` and ``accuracy.png``.

The images are 16×16 JPEGs: the four quadrants carry four colours that code the class,
blended toward the colours of a similar class the harder the image is (the lower its true
selection frequency), plus pixel noise. Workers see the same difficulty: an honest worker
selects an image with probability equal to its true selection frequency.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from imagenetv2.variants import CONFIG_NAMES
from pipeline.toys.annotators import demo_round_trip
from pipeline.toys.colour_world import (
    CLASSIFIERS,
    class_codes,
    encode_images,
    features_of_jpeg,
    image_codes,
    write_image_table,
)
from pipeline.toys.synthetic_pool import PoolShape, SyntheticPool, make_synthetic_pool

logger = logging.getLogger(__name__)

RULES = CONFIG_NAMES  # the three sampling rules, from the variant table
DEMO_SHAPE = PoolShape(
    n_classes=1000, candidates_per_class=28, originals_per_class=8, positive_controls=8, negative_controls=2,
    grid=28, annotators=15, workers=400, spammer_fraction=0.03, rejected_fraction=0.01, candidate_beta=(1.8, 1.1),
)
MIN_CONTROL_ACCURACY = 0.65
PER_CLASS = 3
MIN_ORIGINALS_PER_CLASS = 6


def write_review_inputs(folder: Path, pool: SyntheticPool, seed: int) -> dict[str, Path]:
    """A blacklist, confirmed near-duplicate pairs and a review table, as a review would leave them."""
    import csv

    from pipeline.rebuild.near_duplicate_rules import RELEASED_REVIEW_TARGETS

    rng = np.random.default_rng([seed, 13])
    ids = pool.candidate_ids
    n = len(ids)
    order = rng.permutation(n)
    blacklist = sorted(ids[order[: n // 200]].tolist())
    to_original = order[n // 200 : n // 200 + n // 250]  # near-duplicates of an original image
    pair_left = order[n // 200 + n // 250 : n // 200 + n // 250 + n // 250]  # near-duplicates of another candidate
    pair_right = (pair_left // pool.shape.candidates_per_class) * pool.shape.candidates_per_class + (
        (pair_left % pool.shape.candidates_per_class + 1) % pool.shape.candidates_per_class
    )
    unreviewed = order[-(n // 100):]
    paths = {"blacklist": folder / "blacklist.json", "near_duplicates": folder / "near-duplicates.csv", "near_duplicate_review": folder / "near-duplicate-review.csv"}
    paths["blacklist"].write_text(json.dumps(blacklist, indent=1) + "\n", encoding="utf-8")
    with open(paths["near_duplicates"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["image_id", "duplicate_id"])
        for i in to_original:
            writer.writerow([ids[i], f"n{rng.integers(1440764, 15075141):08d}_{rng.integers(1, 99999)}.JPEG"])
        for i, j in zip(pair_left, pair_right):
            writer.writerow([ids[i], ids[j]])
    reviewed = np.ones(n, bool)
    reviewed[unreviewed] = False
    with open(paths["near_duplicate_review"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["candidate_id", "l2", "fc7", "dssim"])
        for i in range(n):
            factor = 1.5 if reviewed[i] else 0.5  # unreviewed: the review stopped short of the dssim target
            writer.writerow([ids[i], RELEASED_REVIEW_TARGETS["l2"] * 1.5, RELEASED_REVIEW_TARGETS["fc7"] * 1.5, RELEASED_REVIEW_TARGETS["dssim"] * factor])
    return paths


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoResult:
    output: Path
    rows: list  # one dict per (classifier, set)
    fits: dict  # set → linear fit
    seconds: float


class _Steps:
    """Prints numbered steps with their durations (the demo's progress)."""

    def __init__(self, total: int, echo: Callable[[str], None]):
        self.total, self.echo, self.number, self.start = total, echo, 0, time.perf_counter()
        self.step_start = self.start

    def __call__(self, text: str) -> None:
        now = time.perf_counter()
        if self.number:
            self.echo(f"      done in {now - self.step_start:.1f} s")
        self.number += 1
        self.step_start = now
        self.echo(f"[{self.number}/{self.total}] {text}")

    def finish(self) -> float:
        now = time.perf_counter()
        self.echo(f"      done in {now - self.step_start:.1f} s")
        return now - self.start


def run_demo(
    output: Path,
    *,
    seed: int = 0,
    shape: PoolShape = DEMO_SHAPE,
    per_class: int = PER_CLASS,
    n_bootstrap: int = 20_000,
    echo: Callable[[str], None] = print,
    show_progress: bool = True,
) -> DemoResult:
    """Run the whole demo into ``output`` (replaced if it is a previous demo output)."""
    from tqdm.auto import tqdm

    from pipeline.core.ownership import check_output_dir, owned_directory
    from pipeline.rebuild.build_set import build_set
    from pipeline.toys.planted_duplicates import demo_near_duplicates

    output = Path(output)
    check_output_dir(output, "demo")  # before any step: replaced only if a demo wrote it
    import datasets

    datasets.disable_progress_bars()  # the numbered steps are the demo's progress
    datasets.logging.set_verbosity_error()
    progress = (lambda it: tqdm(it, leave=False, unit="batch", desc="images")) if show_progress else (lambda it: it)
    steps = _Steps(8, echo)
    with owned_directory(output, "demo") as tmp:
        world = _generate_inputs(tmp / "inputs", shape, seed, progress, steps)
        _annotate(tmp, world, shape, seed, echo, steps)
        steps("near-duplicates on the classes with planted copies, then sample: three rules, a simulated final review, "
              "and a second revision chained from the first")
        pool, original_images = world.pool, world.original_images
        demo_near_duplicates(tmp, pool, world.planted, world.candidate_images, original_images, seed=seed, echo=echo)
        revisions = _sample_all(tmp, world.review, per_class, seed, echo)

        steps("build-set: release-layout tars and the Hub-ready folder, through the ImageNetV2 builder")
        build_set(tmp / "pool", [revisions[r] for r in RULES], tmp / "sets")

        steps("load_dataset on the Hub-ready folder")
        loaded = _load_sets(tmp / "sets" / "hub", echo)

        steps(f"evaluating {len(CLASSIFIERS)} classifiers on the originals and the new sets")
        rows, fits, correct = _evaluate(original_images, pool, world.codes, loaded, n_bootstrap)
        sets = _set_summary(pool, loaded, revisions)

        steps("results: table, results.json, accuracy.png, and `report` on the evaluation")
        _write_results(tmp, rows, fits, sets, echo)
        from pipeline.toys.demo_report import write_demo_report

        image_ids = {"original": list(pool.original_ids)} | {rule: ds["candidate_id"] for rule, ds in loaded.items()}
        write_demo_report(tmp / "report", rows, correct, image_ids, tmp / "pool", n_bootstrap=n_bootstrap, echo=echo)
        seconds = steps.finish()
    echo(f"demo finished in {seconds:.0f} s; outputs in {output}/")
    echo(f"report: {output / 'report' / 'report.md'} (tables), {output / 'report' / 'report.json'}; figures in {output / 'report' / 'figures'}/")
    return DemoResult(output, rows, fits, seconds)


@dataclass
class _World:
    """The demo's synthetic inputs, shared by its steps."""

    pool: SyntheticPool
    codes: np.ndarray
    candidate_images: list
    original_images: list
    planted: object
    review: dict
    inputs: Path


def _generate_inputs(inputs: Path, shape: PoolShape, seed: int, progress, steps) -> _World:
    """Step 1: the synthetic pool, its images (with planted near-duplicates) and the review inputs."""
    from pipeline.toys.planted_duplicates import plant_in_toy_pool

    steps(f"generating a synthetic pool: {shape.n_classes * shape.candidates_per_class:,} candidates, "
          f"{shape.n_classes * shape.originals_per_class:,} originals, {shape.annotators} workers per task")
    pool = make_synthetic_pool(seed, shape)
    codes = class_codes(shape.n_classes, seed)
    candidate_codes, original_codes = image_codes(pool, codes)
    inputs.mkdir()
    pool.write_candidates_jsonl(inputs / "candidates.jsonl")
    pool.write_originals_csv(inputs / "originals.csv")
    candidate_images = encode_images(candidate_codes, seed, progress)
    original_images = encode_images(original_codes, seed + 1, progress)
    planted = plant_in_toy_pool(pool, candidate_images, original_images, seed)  # near-duplicates, found in step 4
    write_image_table(inputs / "images.parquet", "candidate_id", pool.candidate_ids, candidate_images)
    write_image_table(inputs / "originals-images.parquet", "image_id", pool.original_ids, original_images)
    review = write_review_inputs(inputs, pool, seed)
    return _World(pool, codes, candidate_images, original_images, planted, review, inputs)


def _annotate(tmp: Path, world: _World, shape: PoolShape, seed: int, echo, steps) -> None:
    """Steps 2 and 3: tasks answered by simulated workers, ingest --tasks, selection frequencies."""
    from pipeline.rebuild.ingest import ingest
    from pipeline.rebuild.selection_frequency import selection_frequency_stage

    inputs = world.inputs
    steps("tasks -> simulated workers -> ingest --tasks: grids with hidden controls, answered as an MTurk batch")
    crowd = demo_round_trip(world.pool, inputs, shape, seed, positive=MIN_ORIGINALS_PER_CLASS, echo=echo)
    report = ingest(tmp / "pool", candidates=inputs / "candidates.jsonl", originals=inputs / "originals.csv",
                    results=[inputs / "batch-results.csv"], images=inputs / "images.parquet", tasks=[inputs / "tasks"])
    echo(f"      {report['annotation_rows']:,} annotations in {report['assignments']['total']:,} assignments "
         f"({report['assignments']['Rejected']} rejected) by {report['workers']} workers")
    steps(f"selection-frequency (dropping workers below {MIN_CONTROL_ACCURACY:.0%} on the controls)")
    _, sf_report = selection_frequency_stage(tmp / "pool", min_control_accuracy=MIN_CONTROL_ACCURACY)
    spammers = len(crowd["spammers"])
    echo(f"      dropped {len(sf_report['worker_filter']['dropped'])} workers (the pool has {spammers} random clickers); "
         f"mean selection frequency: candidates {sf_report['mean_selection_frequency']['candidates']:.3f}, "
         f"originals {sf_report['mean_selection_frequency']['originals_own_class']:.3f}")


def _sample_all(tmp: Path, review: dict, per_class: int, seed: int, echo) -> dict[str, Path]:
    from pipeline.rebuild.revision import SamplingConfig
    from pipeline.rebuild.sample import sample_stage

    folder = tmp / "revisions"
    final = {}
    for number, rule in enumerate(RULES):
        config = SamplingConfig(rule=rule, seed=seed * 1000 + number, per_class=per_class, min_num_val_images_per_wnid=MIN_ORIGINALS_PER_CLASS)
        first = sample_stage(tmp / "pool", folder / f"demo-{rule}-0.json", config, blacklist=review["blacklist"],
                             near_duplicates=review["near_duplicates"], near_duplicate_review=review["near_duplicate_review"])
        # the final review: look at every chosen image, blacklist a few (here: every 40th, deterministically)
        chosen = sorted(cid for cid, _ in first.revision.image_filenames)
        blacklist = sorted(set(json.loads(review["blacklist"].read_text("utf-8"))) | set(chosen[::40]))
        reviewed = folder / f"blacklist-after-{rule}-0.json"
        reviewed.write_text(json.dumps(blacklist, indent=1) + "\n", encoding="utf-8")
        second = sample_stage(tmp / "pool", folder / f"demo-{rule}-1.json", config, blacklist=reviewed,
                              near_duplicates=review["near_duplicates"], near_duplicate_review=review["near_duplicate_review"],
                              starting_from=folder / f"demo-{rule}-0.json")
        r = second.report
        echo(f"      {rule:<17} {r['images']:,} images, valid {r['is_valid']}, kept {r['carried_over']:,} of revision 0, "
             f"replaced {r['replaced_from_previous']}, filled upward {r['upward_sampled']}; excluded "
             + ", ".join(f"{k} {v:,}" for k, v in r["exclusions"].items() if v))
        final[rule] = folder / f"demo-{rule}-1.json"
    return final


def _load_sets(hub: Path, echo) -> dict:
    import datasets

    loaded = {}
    for rule in RULES:
        ds = datasets.load_dataset(str(hub), rule, split="test")
        loaded[rule] = ds
        echo(f"      {rule:<17} {ds.num_rows:,} rows, columns {', '.join(ds.column_names[:4])}, ...")
    return loaded


def _evaluate(original_images: list[bytes], pool: SyntheticPool, codes: np.ndarray, loaded: dict, n_bootstrap: int):
    from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

    original_features = np.stack([features_of_jpeg(data) for data in original_images])
    original_labels = _imagenet_index(pool.wnids[pool.original_class])
    sets = {"original": (original_features, original_labels)}
    for rule, ds in loaded.items():
        table = ds.with_format("arrow")[:]
        images = table.column("image").to_pylist()
        sets[rule] = (np.stack([features_of_jpeg(im["bytes"]) for im in images]), np.asarray(table.column("label").to_pylist()))
    full_codes = np.full((1000, codes.shape[1]), 1e6)  # classes outside the pool are never predicted
    full_codes[_imagenet_index(pool.wnids)] = codes
    rows, correct = [], {}
    for classifier in CLASSIFIERS:
        for name, (features, labels) in sets.items():
            predicted = classifier.predict(features, full_codes)
            correct[(classifier.name, name)] = predicted == labels  # per image, for the report's selection-frequency bins
            result = cpa.accuracy_counts(predicted.tolist(), labels.tolist())
            rows.append({"classifier": classifier.name, "set": name, **{k: result[k] for k in ("accuracy", "ci_low", "ci_high", "correct", "total")}})
    fits = {}
    for rule in loaded:
        original = [r["accuracy"] for r in rows if r["set"] == "original"]
        new = [r["accuracy"] for r in rows if r["set"] == rule]
        fits[rule] = cpa.linear_fit(original, new, n_bootstrap=n_bootstrap, seed=0)
    return rows, fits, correct


def _set_summary(pool: SyntheticPool, loaded: dict, revisions: dict) -> dict:
    """Per set: images, mean observed selection frequency (the report's) and mean true one (known here)."""
    from pipeline.rebuild.revision import output_paths

    true_sf = dict(zip(pool.candidate_ids, pool.candidate_true_sf))
    first = json.loads(output_paths(revisions[RULES[0]])[1].read_text("utf-8"))
    summary = {"original": {"images": len(pool.original_ids), "observed_sf": first["mean_selection_frequency"]["originals"],
                            "true_sf": float(pool.original_true_sf.mean())}}
    for rule, ds in loaded.items():
        report = json.loads(output_paths(revisions[rule])[1].read_text("utf-8"))
        ids = ds.with_format("arrow")["candidate_id"].to_pylist()
        summary[rule] = {"images": len(ids), "observed_sf": report["mean_selection_frequency"]["set"],
                         "true_sf": float(np.mean([true_sf[i] for i in ids]))}
    return summary


def _imagenet_index(wnids) -> np.ndarray:
    from imagenetv2.classes import wnid_to_index

    index = wnid_to_index()
    return np.array([index[w] for w in wnids])


def _write_results(folder: Path, rows: list, fits: dict, summary: dict, echo) -> None:
    sets = ["original", *fits]
    header = f"{'classifier':<22}" + "".join(f"{s:>24}" for s in sets)
    echo("")
    echo(f"{'set':<22}" + "".join(f"{s:>24}" for s in sets))
    echo(f"{'images':<22}" + "".join(f"{summary[s]['images']:>24,}" for s in sets))
    echo(f"{'mean observed SF':<22}" + "".join(f"{summary[s]['observed_sf']:>24.3f}" for s in sets))
    echo(f"{'mean true SF':<22}" + "".join(f"{summary[s]['true_sf']:>24.3f}" for s in sets))
    echo("")
    echo("top-1 accuracy in % [95% Clopper-Pearson interval]")
    echo(header)
    for classifier in dict.fromkeys(r["classifier"] for r in rows):
        cells = []
        for s in sets:
            r = next(r for r in rows if r["classifier"] == classifier and r["set"] == s)
            cells.append(f"{100 * r['accuracy']:5.1f} [{100 * r['ci_low']:4.1f}, {100 * r['ci_high']:4.1f}]")
        echo(f"{classifier:<22}" + "".join(f"{c:>24}" for c in cells))
    echo("")
    echo("linear fit of new against original accuracy (95% bootstrap intervals)")
    for rule, fit in fits.items():
        echo(f"  {rule:<17} new = {fit['slope']:.2f} [{fit['slope_ci_low']:.2f}, {fit['slope_ci_high']:.2f}] x original "
             f"{fit['intercept']:+.3f} [{fit['intercept_ci_low']:+.3f}, {fit['intercept_ci_high']:+.3f}], r2 {fit['r2']:.3f}")
    (folder / "results.json").write_text(json.dumps({"sets": summary, "accuracies": rows, "linear_fits": fits}, indent=2) + "\n", encoding="utf-8")
    plot_accuracies(rows, fits, folder / "accuracy.png")


def plot_accuracies(rows: list, fits: dict, path: Path) -> None:
    """New against original accuracy per set, with Clopper–Pearson error bars and the fitted lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5), dpi=100)
    original = {r["classifier"]: r for r in rows if r["set"] == "original"}
    low = min(r["ci_low"] for r in rows) - 0.03
    grid = np.linspace(low, 1.0, 50)
    ax.plot(grid, grid, color="grey", linestyle="--", linewidth=1, label="y = x")
    for (rule, fit), colour in zip(fits.items(), ("tab:blue", "tab:orange", "tab:green")):
        points = [(original[r["classifier"]], r) for r in rows if r["set"] == rule]
        x = np.array([o["accuracy"] for o, _ in points])
        y = np.array([n["accuracy"] for _, n in points])
        ax.errorbar(
            x, y,
            xerr=[x - [o["ci_low"] for o, _ in points], [o["ci_high"] for o, _ in points] - x],
            yerr=[y - [n["ci_low"] for _, n in points], [n["ci_high"] for _, n in points] - y],
            fmt="o", color=colour, capsize=2, label=rule,
        )
        ax.plot(grid, fit["slope"] * grid + fit["intercept"], color=colour, linewidth=1)
    ax.set_xlim(low, 1.0)
    ax.set_ylim(low, 1.0)
    ax.set_xlabel("accuracy on the originals")
    ax.set_ylabel("accuracy on the new set")
    ax.set_title("Demo: rebuilt test sets")
    ax.legend(loc="lower right")
    fig.tight_layout()
    from pipeline.core.atomic import atomic_file

    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png")
    plt.close(fig)

"""Score (model, dataset) jobs: plan, skip what is stored, run, and aggregate.

:func:`evaluate` is the whole command: it checks the options and the output folder, resolves
the datasets, builds the jobs, skips the ones already stored, runs the rest (here, model by
model, models that share preprocessing next to each other so that they share one decoding
pass per dataset (:mod:`.shared`); or as Ray tasks), and aggregates every stored result into
results.json / results.csv, the fits and fit.png.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from . import jobs as J
from . import results as R
from .datasets_spec import DatasetSpec, resolve_split
from .jobs import DatasetCache, Job, Options, error_row, store
from .models import ModelRecord, check_unique_names, preprocessing_key
from .output import check_output, prepare_output
from .shared import SharedInputs

logger = logging.getLogger(__name__)

__all__ = ["Job", "Options", "Summary", "evaluate", "plan_jobs", "run_local"]


def plan_groups(jobs: Sequence[Job], options: Options, datasets: DatasetCache) -> dict[str, Optional[str]]:
    """The shared-input group of each job (by job key); None where it cannot be told before loading."""
    keys: dict[str, Optional[str]] = {}
    groups: dict[str, Optional[str]] = {}
    for job in jobs:
        if job.model.name not in keys:
            keys[job.model.name] = preprocessing_key(job.model, draft=options.draft, decode_on=options.decode)
        try:
            fingerprint = datasets.get(job).fingerprint
        except Exception:  # noqa: BLE001 - the job records the failure when it runs
            groups[job.key] = None
            continue
        groups[job.key] = SharedInputs.group(job.dataset, fingerprint, keys[job.model.name])
    return groups


def models_in_group_order(jobs: Sequence[Job], groups: dict) -> dict[str, list[Job]]:
    """Jobs by model, models of the same groups next to each other (in order of first appearance)."""
    by_model: dict[str, list[Job]] = {}
    for job in jobs:
        by_model.setdefault(job.model.name, []).append(job)
    first: dict[tuple, int] = {}
    rank: dict[str, int] = {}
    for position, (name, model_jobs) in enumerate(by_model.items()):
        model_groups = tuple(groups.get(j.key) or f"alone {position}" for j in model_jobs)
        rank[name] = first.setdefault(model_groups, position)
    return dict(sorted(by_model.items(), key=lambda item: rank[item[0]]))


def run_local(jobs: Sequence[Job], options: Options, on_result: Callable) -> int:
    """Run ``jobs`` in this process, loading each model once for all its datasets; the decoding passes made."""
    datasets = DatasetCache(options)
    groups = plan_groups(jobs, options, datasets)
    shared = SharedInputs(Path(options.output), options.cache_memory, keep_on_disk=options.cache)
    for group in groups.values():
        shared.expect(group)
    try:
        for name, model_jobs in models_in_group_order(jobs, groups).items():
            try:
                model = J.load_job_model(model_jobs[0], options)
            except Exception as e:  # noqa: BLE001 - recorded for each of its datasets
                logger.error("model %s could not be loaded: %s: %s", name, type(e).__name__, e)
                for job in model_jobs:
                    shared.done(groups[job.key])
                    on_result(job, error_row(job, options, e), None)
                continue
            for job in model_jobs:
                row, arrays = J.evaluate_job(job, options, model, datasets, shared)
                shared.done(groups[job.key])
                on_result(job, row, arrays)
            del model
            _free_cuda()
    finally:
        shared.close()
    return shared.decode_passes


def _free_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def plan_jobs(models: Sequence[ModelRecord], original: DatasetSpec, new: Sequence[DatasetSpec], cache_dir=None) -> list[Job]:
    """Every (model, dataset) job, original first; splits resolved; file keys checked unique."""
    check_unique_names(models)
    datasets = [(original, "original")] + [(spec, "new") for spec in new]
    resolved = [(spec, resolve_split(spec, cache_dir), role) for spec, role in datasets]
    names = [spec.name(split) for spec, split, _ in resolved]
    if len(set(names)) != len(names):
        raise ValueError(f"datasets must be distinct, got {names}")
    jobs = [Job(model, spec, split, role) for model in models for spec, split, role in resolved]
    keys: dict[str, Job] = {}
    for job in jobs:
        if job.key in keys:
            other = keys[job.key]
            raise ValueError(
                f"({job.model.name}, {job.dataset}) and ({other.model.name}, {other.dataset}) would share the "
                f"result file {job.key}; rename a model or copy a dataset folder under another name"
            )
        keys[job.key] = job
    return jobs


@dataclass
class Summary:
    rows: list
    fits: dict
    ran: int
    skipped: int
    errors: int
    decode_passes: int = 0


def evaluate(
    models: Sequence[ModelRecord],
    original: DatasetSpec,
    new: Sequence[DatasetSpec],
    options: Options,
    *,
    ray_address: Optional[str] = None,
) -> Summary:
    """Score every model on the original and new datasets; write results, fits and plot.

    Everything that can be checked is checked before any model runs: the eval extra, the
    options, the device, the output folder, the datasets and their splits.
    """
    from .extra import require_eval_extra
    from .predict import resolve_device

    require_eval_extra()
    resolve_device(options.device)
    check_output(options.output, [original, *new], models)
    jobs = plan_jobs(models, original, new, options.cache_dir)
    output = prepare_output(options.output, [original, *new], models)
    pending = [j for j in jobs if not R.is_done(output, j.key, j.signature(options))]
    skipped = len(jobs) - len(pending)
    if skipped:
        logger.info("%d of %d (model, dataset) results already stored in %s; skipping them", skipped, len(jobs), output)

    def on_result(job: Job, row: dict, arrays: Optional[dict]) -> None:
        store(job, options, row, arrays)

    passes = 0
    if pending:
        if ray_address:
            from .distributed import run_with_ray

            run_with_ray(pending, options, ray_address, on_result)
        else:
            passes = run_local(pending, options, on_result)
    elif not options.cache:
        SharedInputs(output, keep_on_disk=False).close()
    return aggregate(output, jobs, models, options, len(pending), skipped, passes)


def aggregate(output: Path, jobs: Sequence[Job], models, options: Options, ran: int, skipped: int, passes: int) -> Summary:
    """results.json, results.csv and fit.png from every stored result of ``jobs``."""
    from .plot import plot_fits

    rows = [R.read_run(output, j.key)["row"] for j in jobs]
    original_name = jobs[0].dataset
    new_names = list(dict.fromkeys(j.dataset for j in jobs if j.role == "new"))
    fits = R.compute_fits(rows, original_name, new_names, n_bootstrap=options.n_bootstrap)
    hidden = ("output", "progress", "decode", "cache_memory", "cache")  # these do not change the numbers
    settings = {
        **{k: v for k, v in dataclasses.asdict(options).items() if k not in hidden},
        "original": original_name,
        "new": new_names,
        "models": [m.to_dict() for m in models],
    }
    if options.decode != "workers":
        settings["decode"] = options.decode
    if options.limit is not None:
        from .sampling import LIMIT_SAMPLE

        settings["limit_sample"] = LIMIT_SAMPLE
    R.write_results(output, rows, fits, settings)
    plot_fits(output / R.FIT_PNG, rows, original_name, new_names, fits)
    errors_total = sum(r["status"] != "ok" for r in rows)
    logger.info(
        "wrote %s, %s and %s: %d results (%d run now, %d reused, %d errors; %d decoding passes)",
        output / R.RESULTS_JSON, output / R.RESULTS_CSV, output / R.FIT_PNG, len(rows), ran, skipped, errors_total, passes,
    )
    return Summary(rows, fits, ran, skipped, errors_total, passes)

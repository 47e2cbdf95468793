"""Score (model, dataset) jobs: predict, count, store; resume, record failures, retry on OOM.

:func:`evaluate` is the whole command: it resolves the datasets, builds the jobs, skips the ones
already stored, runs the rest (here, model by model, or as Ray tasks), and aggregates every
stored result into results.json / results.csv, the fits and fit.png.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from . import results as R
from .datasets_spec import DatasetSpec, LoadedDataset, load_for_scoring, resolve_split
from .labels import LabelMatch, dataset_label_space, match_labels
from .models import LoadedModel, ModelRecord, check_unique_names, load_model

logger = logging.getLogger(__name__)

TOP_K = 5
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Options:
    """Settings of one evaluation (all plain values: they travel to Ray workers)."""

    output: str
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...
    precision: str = "auto"  # autocast dtype on CUDA; "auto": bf16 where supported, else fp16; fp32 on CPU
    batch_size: int = 128
    workers: int = 4
    limit: Optional[int] = None
    draft: bool = True
    pretrained: bool = True
    cache_dir: Optional[str] = None
    confidence_level: float = 0.95
    n_bootstrap: int = 100_000
    progress: bool = True

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.workers < 0:
            raise ValueError(f"--workers must be 0 (load in the main process) or more, got {self.workers}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be a positive number of images, got {self.limit}")


@dataclass(frozen=True)
class Job:
    """One (model, dataset) pair to score."""

    model: ModelRecord
    spec: DatasetSpec
    split: str
    role: str  # "original" or "new"

    @property
    def dataset(self) -> str:
        return self.spec.name(self.split)

    @property
    def key(self) -> str:
        return R.job_key(self.model.name, self.dataset)

    def signature(self, options: Options) -> dict:
        """What a stored result must agree on to be reused."""
        m = self.model
        return {
            "source": m.source,
            "pretrained": m.pretrained if m.pretrained is not None else options.pretrained,
            "kwargs": m.kwargs,
            "checkpoint": m.checkpoint,
            "seed": m.seed,
            "label_map": m.label_map,
            "dataset": {"path": self.spec.path, "config": self.spec.config, "split": self.split},
            "limit": options.limit,
            "draft": options.draft,
            "precision": options.precision,
        }


# --- devices and precision -------------------------------------------------------------------


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device} asked for, but torch sees no CUDA device; use --device cpu")
    return device


def resolve_precision(precision: str, device: str) -> str:
    import torch

    if not device.startswith("cuda"):
        if precision in ("bf16", "fp16"):
            logger.warning("precision %s is for CUDA; running fp32 on %s", precision, device)
        return "fp32"
    if precision == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision


def autocast(device: str, precision: str):
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA (or other) out-of-memory errors, whatever their class."""
    import torch

    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


# --- predicting --------------------------------------------------------------------------------


@dataclass
class Predictions:
    index: np.ndarray  # row index in the split
    label: np.ndarray
    topk: np.ndarray  # (n, k) dataset class ids, best first
    topk_logits: np.ndarray  # (n, k) float32
    batch_size: int  # that finished
    seconds: float

    def arrays(self) -> dict[str, np.ndarray]:
        return {"index": self.index, "label": self.label, "topk": self.topk, "topk_logits": self.topk_logits}


def predict(
    forward: Callable,
    rows,
    *,
    preprocessing,
    batch_size: int,
    workers: int,
    device: str,
    precision: str = "fp32",
    dataset_to_model: Optional[Sequence[int]] = None,
    k: int = TOP_K,
    channels_last: bool = False,
    desc: str = "",
    progress: bool = True,
) -> Predictions:
    """Top-k predictions for every row of ``rows`` (an :class:`inputs.ImageRows`).

    On out of memory the pass goes on from where it stopped with half the batch size (down to 1).
    """
    import torch
    from tqdm.auto import tqdm

    from .inputs import make_loader

    reorder = None if dataset_to_model is None else torch.as_tensor(list(dataset_to_model), device=device)
    chunks: list[tuple] = []
    done = 0
    start = time.perf_counter()
    bar = tqdm(total=len(rows), desc=desc, unit="img", disable=not progress, mininterval=1.0, leave=False)
    try:
        while done < len(rows):
            loader = make_loader(rows.subset(done), batch_size, workers, pin_memory=device.startswith("cuda"))
            out_of_memory = False
            try:
                for images, labels, index in loader:
                    x = preprocessing.finish(images, device, channels_last)
                    with torch.inference_mode(), autocast(device, precision):
                        logits = forward(x)
                    logits = logits.float()
                    if reorder is not None:
                        logits = logits.index_select(1, reorder)
                    top = logits.topk(min(k, logits.shape[1]), dim=1)
                    chunks.append((index.numpy(), labels.numpy(), top.indices.cpu().numpy(), top.values.cpu().numpy()))
                    done += len(index)
                    bar.update(len(index))
            except Exception as e:
                if not is_out_of_memory(e) or batch_size == 1:
                    raise
                out_of_memory = True
            if out_of_memory:  # outside the except block, so the failed batch's tensors are released
                del loader
                x = logits = top = None
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
                logger.warning("%s: out of memory at batch size %d; retrying with %d", desc, batch_size, batch_size // 2)
                batch_size //= 2
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    if not chunks:
        raise ValueError("no images to score")
    index, label, topk, values = (np.concatenate(parts) for parts in zip(*chunks))
    return Predictions(index.astype(np.int64), label.astype(np.int64), topk.astype(np.int32), values.astype(np.float32), batch_size, seconds)


# --- one job -------------------------------------------------------------------------------------


def base_row(job: Job, options: Options) -> dict:
    return dict(
        model=job.model.name,
        source=job.model.source,
        dataset=job.dataset,
        dataset_spec=job.spec.text,
        role=job.role,
        limit=options.limit,
        confidence_level=options.confidence_level,
    )


def error_row(job: Job, options: Options, error: BaseException) -> dict:
    message = f"{type(error).__name__}: {error}"
    return R.make_row(**base_row(job, options), status="error", error=message, finished_at=R.now_utc())


def score_job(job: Job, model: LoadedModel, data: LoadedDataset, options: Options) -> tuple[dict, dict]:
    """Score one loaded model on one loaded dataset: ``(row, prediction arrays)``."""
    from .inputs import ImageRows, TableFetch

    space = dataset_label_space(data.class_names)
    match: LabelMatch = match_labels(
        model.num_outputs, model.label_names, space, job.model.label_map, model=f"model {job.model.name!r}", dataset=f"dataset {job.dataset!r}"
    )
    if match.note:
        logger.info("%s", match.note)
    device = resolve_device(options.device)
    precision = resolve_precision(options.precision, device)
    module = model.module.to(device)
    channels_last = device.startswith("cuda")
    if channels_last:
        module = module.to(memory_format=__import__("torch").channels_last)
    rows = ImageRows(TableFetch(data.table, data.image_column, data.label_column), data.table.num_rows, model.preprocessing)
    predictions = predict(
        model.forward,
        rows,
        preprocessing=model.preprocessing,
        batch_size=job.model.batch_size or options.batch_size,
        workers=options.workers,
        device=device,
        precision=precision,
        dataset_to_model=match.dataset_to_model,
        channels_last=channels_last,
        desc=f"{job.model.name} | {job.dataset}",
        progress=options.progress,
    )
    counts = R.score(predictions.topk, predictions.label, options.confidence_level)
    rate = counts["total"] / predictions.seconds if predictions.seconds > 0 else None
    row = R.make_row(
        **{**base_row(job, options), **counts},
        status="ok",
        error="",
        split_size=data.num_rows_total,
        label_match=match.how,
        preprocessing=model.preprocessing.describe(),
        pretrained=model.pretrained,
        batch_size=predictions.batch_size,
        device=device,
        precision=precision,
        seconds=predictions.seconds,
        images_per_second=rate,
        predictions=R.predictions_relpath(job.key),
        finished_at=R.now_utc(),
    )
    logger.info(
        "%s on %s: top-1 %.2f%% (%d/%d, %g%% CI [%.2f, %.2f]), top-5 %.2f%%, %.1f images/s",
        job.model.name, job.dataset, 100 * row["top1_accuracy"], row["top1_correct"], row["total"],
        100 * options.confidence_level, 100 * row["top1_ci_low"], 100 * row["top1_ci_high"],
        100 * row["top5_accuracy"], rate or 0.0,
    )
    return row, predictions.arrays()


def store(job: Job, options: Options, row: dict, arrays: Optional[dict]) -> None:
    """Predictions first, then the run file that marks the job finished."""
    if arrays is not None:
        R.write_predictions(Path(options.output), job.key, arrays)
    R.write_run(Path(options.output), job.key, row, job.signature(options))


class DatasetCache:
    """Datasets loaded once per run (a failure to load is remembered and re-raised per job)."""

    def __init__(self, options: Options):
        self.options, self.loaded, self.failed = options, {}, {}

    def get(self, job: Job) -> LoadedDataset:
        key = (job.spec.path, job.spec.config, job.split)
        if key in self.failed:
            raise self.failed[key]
        if key not in self.loaded:
            try:
                self.loaded[key] = load_for_scoring(job.spec, job.split, self.options.limit, self.options.cache_dir)
            except Exception as e:
                self.failed[key] = e
                raise
        return self.loaded[key]


def evaluate_job(job: Job, options: Options, model: Optional[LoadedModel] = None, datasets: Optional[DatasetCache] = None):
    """Score one job, never raising for a model's failure: ``(row, arrays or None)``."""
    try:
        if model is None:
            model = load_model(job.model, pretrained=options.pretrained, draft=options.draft)
        data = (datasets or DatasetCache(options)).get(job)
        return score_job(job, model, data, options)
    except Exception as e:  # noqa: BLE001 - a failing model becomes an error row
        logger.error("%s on %s failed: %s: %s", job.model.name, job.dataset, type(e).__name__, e)
        logger.debug("traceback", exc_info=True)
        return error_row(job, options, e), None


def run_local(jobs: Sequence[Job], options: Options, on_result: Callable) -> None:
    """Run ``jobs`` in this process, loading each model once for all its datasets."""
    datasets = DatasetCache(options)
    by_model: dict[str, list[Job]] = {}
    for job in jobs:
        by_model.setdefault(job.model.name, []).append(job)
    for name, model_jobs in by_model.items():
        record = model_jobs[0].model
        try:
            model = load_model(record, pretrained=options.pretrained, draft=options.draft)
        except Exception as e:  # noqa: BLE001 - recorded for each of its datasets
            logger.error("model %s could not be loaded: %s: %s", name, type(e).__name__, e)
            for job in model_jobs:
                on_result(job, error_row(job, options, e), None)
            continue
        for job in model_jobs:
            row, arrays = evaluate_job(job, options, model, datasets)
            on_result(job, row, arrays)
        del model
        _free_cuda()


def _free_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- the whole command -------------------------------------------------------------------------


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


def evaluate(
    models: Sequence[ModelRecord],
    original: DatasetSpec,
    new: Sequence[DatasetSpec],
    options: Options,
    *,
    ray_address: Optional[str] = None,
) -> Summary:
    """Score every model on the original and new datasets; write results, fits and plot."""
    output = Path(options.output)
    output.mkdir(parents=True, exist_ok=True)
    jobs = plan_jobs(models, original, new, options.cache_dir)
    pending = [j for j in jobs if not R.is_done(output, j.key, j.signature(options))]
    skipped = len(jobs) - len(pending)
    if skipped:
        logger.info("%d of %d (model, dataset) results already stored in %s; skipping them", skipped, len(jobs), output)

    def on_result(job: Job, row: dict, arrays: Optional[dict]) -> None:
        store(job, options, row, arrays)

    if pending:
        if ray_address:
            from .distributed import run_with_ray

            run_with_ray(pending, options, ray_address, on_result)
        else:
            run_local(pending, options, on_result)
    rows = [R.read_run(output, j.key)["row"] for j in jobs]
    original_name = jobs[0].dataset
    new_names = list(dict.fromkeys(j.dataset for j in jobs if j.role == "new"))
    fits = R.compute_fits(rows, original_name, new_names, n_bootstrap=options.n_bootstrap)
    settings = {
        **{k: v for k, v in dataclasses.asdict(options).items() if k not in ("output", "progress")},
        "original": original_name,
        "new": new_names,
        "models": [m.to_dict() for m in models],
    }
    R.write_results(output, rows, fits, settings)
    from .plot import plot_fits

    plot_fits(output / R.FIT_PNG, rows, original_name, new_names, fits)
    errors_total = sum(r["status"] != "ok" for r in rows)
    logger.info(
        "wrote %s, %s and %s: %d results (%d run now, %d reused, %d errors)",
        output / R.RESULTS_JSON, output / R.RESULTS_CSV, output / R.FIT_PNG, len(rows), len(pending), skipped, errors_total,
    )
    return Summary(rows, fits, len(pending), skipped, errors_total)

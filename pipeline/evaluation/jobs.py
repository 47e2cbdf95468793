"""One (model, dataset) job: its settings, scoring it, and the row that records it.

Shared by the local runner (:mod:`.runner`) and the Ray path (:mod:`.distributed`), which both
import this module and not each other.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import results as R
from .datasets_spec import DatasetSpec, LoadedDataset, load_for_scoring
from .labels import LabelMatch, dataset_label_space, match_labels
from .models import LoadedModel, ModelRecord, load_model
from .predict import PRECISIONS, TOP_K, predict, resolve_device, resolve_precision  # noqa: F401 - re-exported

logger = logging.getLogger(__name__)

DECODES = ("workers", "device")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer of at least {minimum}, got {value!r}")


@dataclass(frozen=True)
class Options:
    """Settings of one evaluation (all plain values: they travel to Ray workers), checked up front."""

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
    decode: str = "workers"  # "workers" (CPU DataLoader workers) or "device" (nvJPEG on CUDA)
    cache_memory: float = 4.0  # GiB of decoded images kept in memory; more goes to OUTPUT/cache
    cache: bool = True  # keep OUTPUT/cache for re-runs (--no-cache: remove it)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"--batch-size must be at least 1, got {self.batch_size}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"--workers must be 0 (load in the main process) or more, got {self.workers}")
        if self.limit is not None and (isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1):
            raise ValueError(f"--limit must be a positive number of images, got {self.limit}")
        if isinstance(self.n_bootstrap, bool) or not isinstance(self.n_bootstrap, int) or self.n_bootstrap < 0:
            raise ValueError(f"--n-bootstrap must be 0 (no fit intervals) or a positive number of resamples, got {self.n_bootstrap}")
        if isinstance(self.confidence_level, bool) or not isinstance(self.confidence_level, (int, float)) or not 0 < self.confidence_level < 1:
            raise ValueError(f"the confidence level must lie strictly between 0 and 1 (e.g. 0.95), got {self.confidence_level!r}")
        if not isinstance(self.device, str) or not _DEVICE.match(self.device):
            raise ValueError(f"--device must be auto, cpu, mps, cuda or cuda:N, got {self.device!r}")
        if self.decode not in DECODES:
            raise ValueError(f"--decode must be one of {DECODES}, got {self.decode!r}")
        if isinstance(self.cache_memory, bool) or not isinstance(self.cache_memory, (int, float)) or not self.cache_memory >= 0:
            raise ValueError(f"--cache-memory must be a number of GiB, 0 or more, got {self.cache_memory!r}")


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
        signature = {
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
        if options.limit is not None:
            from .sampling import LIMIT_SAMPLE

            signature["limit_sample"] = LIMIT_SAMPLE
        if options.decode != "workers":
            signature["decode"] = options.decode
        return signature


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


def job_rows(data: LoadedDataset, preprocessing):
    """The rows a job scores, as :class:`~.loaders.ImageRows` (row indices of the split)."""
    from .loaders import ImageRows, TableFetch

    fetch = TableFetch(data.table, data.image_column, data.label_column)
    return ImageRows(fetch, data.table.num_rows, preprocessing, indices=data.rows)


def score_job(job: Job, model: LoadedModel, data: LoadedDataset, options: Options, shared=None) -> tuple[dict, dict]:
    """Score one loaded model on one loaded dataset: ``(row, prediction arrays)``.

    ``shared`` (a :class:`~.shared.SharedInputs`) gives the batches when models share a pass.
    """
    from .loaders import stream

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
    rows = job_rows(data, model.preprocessing)
    if shared is not None:
        group = shared.group(job.dataset, data.fingerprint, model.preprocessing.key())
        source = shared.source(group, rows, options.workers, device)
    else:
        source = stream(rows, options.workers, device)
    predictions = predict(
        model.forward, source, preprocessing=model.preprocessing, batch_size=job.model.batch_size or options.batch_size,
        device=device, precision=precision, dataset_to_model=match.dataset_to_model, channels_last=channels_last,
        desc=f"{job.model.name} | {job.dataset}", progress=options.progress,
    )
    return result_row(job, options, model, data, match, predictions, device, precision), predictions.arrays()


def result_row(job, options, model, data, match, predictions, device, precision) -> dict:
    counts = R.score(predictions.topk, predictions.label, options.confidence_level)
    rate = counts["total"] / predictions.seconds if predictions.seconds > 0 else None
    row = R.make_row(
        **{**base_row(job, options), **counts},
        status="ok", error="", split_size=data.num_rows_total, label_match=match.how,
        preprocessing=model.preprocessing.describe(), pretrained=model.pretrained, batch_size=predictions.batch_size,
        device=device, precision=precision, seconds=predictions.seconds, images_per_second=rate,
        predictions=R.predictions_relpath(job.key), finished_at=R.now_utc(),
    )
    logger.info(
        "%s on %s: top-1 %.2f%% (%d/%d, %g%% CI [%.2f, %.2f]), top-5 %.2f%%, %.1f images/s",
        job.model.name, job.dataset, 100 * row["top1_accuracy"], row["top1_correct"], row["total"],
        100 * options.confidence_level, 100 * row["top1_ci_low"], 100 * row["top1_ci_high"],
        100 * row["top5_accuracy"], rate or 0.0,
    )
    return row


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


def load_job_model(job: Job, options: Options) -> LoadedModel:
    return load_model(job.model, pretrained=options.pretrained, draft=options.draft, decode_on=options.decode)


def evaluate_job(job: Job, options: Options, model: Optional[LoadedModel] = None, datasets: Optional[DatasetCache] = None, shared=None):
    """Score one job, never raising for a model's failure: ``(row, arrays or None)``."""
    try:
        if model is None:
            model = load_job_model(job, options)
        data = (datasets or DatasetCache(options)).get(job)
        return score_job(job, model, data, options, shared)
    except Exception as e:  # noqa: BLE001 - a failing model becomes an error row
        logger.error("%s on %s failed: %s: %s", job.model.name, job.dataset, type(e).__name__, e)
        logger.debug("traceback", exc_info=True)
        return error_row(job, options, e), None

"""The ``near-duplicates`` stage: candidates and reference collections → neighbours and review status.

Outputs in the output folder (marked as this command's; written together, atomically)::

    neighbours.parquet     candidate_id, metric, rank, reference_id, reference_source, distance
    review_status.parquet  per candidate and measure: reviewed up to which distance, sufficiently reviewed?
    report.json            settings, counts per collection, images left out and why, timings and rates
    features/              the feature cache (or --cache DIR): a re-run computes only new images
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.core.ownership import check_output_dir, owned_files, owner, write_marker
from pipeline.rebuild.tables import write_table

from .collections import open_collection
from .dssim_search import dssim_top_k
from .features import FC7_DIM, PIXELS_DIM, Fc7Model, FeatureStore, compute_features
from .review_status import SCALES, THRESHOLDS, read_reviews, review_status, summary
from .search import search_top_k, search_with_ray

logger = logging.getLogger(__name__)

COMMAND = "near-duplicates"
METRICS = ("l2", "fc7", "dssim")
OUTPUT_FILES = ("neighbours.parquet", "review_status.parquet", "report.json")
NEIGHBOURS_SCHEMA = pa.schema([
    ("candidate_id", pa.string()), ("metric", pa.string()), ("rank", pa.int32()),
    ("reference_id", pa.string()), ("reference_source", pa.string()), ("distance", pa.float64()),
])


@dataclass(frozen=True)
class SearchConfig:
    """Settings of a near-duplicate search (recorded in report.json)."""

    metrics: tuple = METRICS
    top_k: int = 30
    thresholds: Mapping = field(default_factory=lambda: dict(THRESHOLDS))
    include_candidates: bool = True  # the candidates are references too (never their own neighbour)
    memory_mb: int = 1024
    device: str = "auto"  # auto: a GPU through torch when there is one, else FAISS on the CPU
    fc7_model: str = "torchvision:vgg16"
    pretrained: bool = True
    fc7_dtype: str = "float32"
    similar_classes: int = 5
    workers: int = 2
    ray: str | None = None
    ray_shards: int = 0
    id_column: str | None = None

    def __post_init__(self):
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics:
            raise ValueError(f"unknown measure(s) {unknown or list(self.metrics)}; choose from {', '.join(METRICS)}")
        if not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"--top-k must be a positive number of neighbours, got {self.top_k!r}")
        if self.memory_mb < 1:
            raise ValueError(f"--memory-mb must be at least 1, got {self.memory_mb}")
        if self.fc7_dtype not in ("float16", "float32"):
            raise ValueError(f"--fc7-dtype must be float16 or float32, got {self.fc7_dtype!r}")
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ValueError(f"--device must be auto, cpu or cuda[:N], got {self.device!r}")
        if "dssim" in self.metrics and self.similar_classes < 0 and not {"l2", "fc7"} & set(self.metrics):
            raise ValueError("--similar-classes -1 compares dssim only with the l2/fc7 neighbours; add l2 or fc7 to --metrics")
        missing = [m for m in self.metrics if m not in self.thresholds]
        if missing:
            raise ValueError(f"no review threshold for {', '.join(missing)}")


@dataclass(frozen=True)
class NearDuplicateResult:
    neighbours: pa.Table
    status: pa.Table
    report: dict


@dataclass
class _Side:
    """Collections in order, as one global row space: id, source and class of every row."""

    ids: list
    sources: list
    wnids: list
    segments: dict  # feature kind → list of Segment


def _device(config: SearchConfig) -> str:
    if config.device != "auto":
        return config.device
    if not Path("/dev/nvidiactl").exists() and not Path("/dev/nvidia0").exists():
        return "cpu"  # no GPU here: do not pay for importing torch
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _open_all(candidates: str, references: Sequence[str], config: SearchConfig, classes):
    cand = open_collection(candidates, id_column=config.id_column, classes=classes)
    refs, seen = [], {cand.key}
    for spec in references:
        collection = open_collection(spec, id_column=config.id_column, classes=classes)
        if collection.key in seen:
            logger.warning("reference %s is the same collection as one given before; searched once", spec)
            continue
        seen.add(collection.key)
        refs.append(collection)
    if config.include_candidates:
        refs.append(cand)
    if not refs:
        raise ValueError("no references to search: give --references, or keep the candidates as references")
    return cand, refs


def _stores(cache: Path, collection, kinds: dict) -> dict:
    return {kind: FeatureStore(cache, name, collection.key, dim, dtype) for kind, (name, dim, dtype) in kinds.items()}


def _assemble(collections, cache: Path, kinds: dict, left_out: set) -> _Side:
    side = _Side([], [], [], {kind: [] for kind in kinds})
    for collection in collections:
        stores = _stores(cache, collection, kinds)
        present = [(i, w) for i, w in zip(collection.ids, collection.wnids) if (collection.name, i) not in left_out]
        ids = [i for i, _ in present]
        side.ids += ids
        side.sources += [collection.name] * len(ids)
        side.wnids += [w for _, w in present]
        for kind, store in stores.items():
            side.segments[kind] += store.segments(ids) if ids else []
    return side


def _search(metric: str, query: _Side, ref: _Side, k: int, exclude, config: SearchConfig, device: str, progress, timings: dict):
    kind = "pixels" if metric == "l2" else "fc7"
    # no centering: the kept pairs are re-measured exactly, so FAISS's float32 only ranks them
    options = {"exclude": exclude, "memory_bytes": config.memory_mb << 20, "device": device}
    if config.ray:
        return search_with_ray(config.ray, query.segments[kind], ref.segments[kind], k, shards=config.ray_shards, **options)
    spent: dict = {}
    found = search_top_k(query.segments[kind], ref.segments[kind], k, progress=progress, timings=spent, **options)
    timings[f"remeasure_{metric}"] = spent.get("remeasure", 0.0)
    return found


def _dssim(query: _Side, ref: _Side, k: int, results: dict, exclude, classes, config: SearchConfig, progress):
    extra = np.concatenate([I for _, I in results.values()], axis=1).tolist() if results else None
    D, I, pairs = dssim_top_k(query.segments["pixels"], query.wnids, ref.segments["pixels"], ref.wnids, k, extra=extra,
                              exclude=exclude, classes=classes, similar=config.similar_classes, progress=progress)
    return (D, I), int(pairs.sum())


def _neighbour_table(query: _Side, ref: _Side, results: dict) -> pa.Table:
    columns = {name: [] for name in NEIGHBOURS_SCHEMA.names}
    for metric, (D, I) in results.items():
        for q, cid in enumerate(query.ids):
            for rank, (d, i) in enumerate(zip(D[q], I[q]), start=1):
                if i < 0:
                    break
                columns["candidate_id"].append(cid)
                columns["metric"].append(metric)
                columns["rank"].append(rank)
                columns["reference_id"].append(ref.ids[i])
                columns["reference_source"].append(ref.sources[i])
                columns["distance"].append(float(d))
    return pa.table(columns, schema=NEIGHBOURS_SCHEMA)


def _prepare_output(output: Path, candidates: str, references: Sequence[str], reviews) -> None:
    local = [p for p in (candidates, *references, reviews) if p is not None and Path(p).exists()]
    check_output_dir(output, COMMAND, inputs=local)
    output.mkdir(parents=True, exist_ok=True)
    if owner(output) is None:
        write_marker(output, COMMAND)


def _features(collections, cache: Path, config: SearchConfig, device: str, progress):
    kinds, model = {}, None
    if {"l2", "dssim"} & set(config.metrics):
        kinds["pixels"] = ("pixels-256", PIXELS_DIM, "uint8")
    if "fc7" in config.metrics:
        model = Fc7Model(config.fc7_model, config.pretrained, device)
        kinds["fc7"] = (f"fc7-{model.key}-{config.fc7_dtype}", FC7_DIM, config.fc7_dtype)
    left_out, computed = [], 0
    for collection in collections:
        before = len(left_out)
        stores = _stores(cache, collection, kinds)
        indexes = [set(store.index()) for store in stores.values()]
        todo = sum(1 for i in collection.ids if any(i not in index for index in indexes))
        left_out += compute_features(collection, stores, model, workers=config.workers, progress=progress)
        computed += todo - (len(left_out) - before)
    return kinds, left_out, computed


def near_duplicate_search(
    candidates: str,
    references: Sequence[str],
    output,
    config: SearchConfig = SearchConfig(),
    *,
    reviews=None,
    cache=None,
    classes=None,
    progress=None,
) -> NearDuplicateResult:
    """Run the stage: features (cached), exact top-k per measure, review status; write the outputs.

    ``progress`` is a tqdm-like factory (``progress(total=..., desc=...)``) or None.
    """
    from pipeline.rebuild.classes import load_classes

    output = Path(output)
    _prepare_output(output, candidates, references, reviews)
    reviewed = read_reviews(reviews) if reviews is not None else set()
    classes = classes if classes is not None else load_classes()
    cand, refs = _open_all(candidates, references, config, classes)
    cache = Path(cache) if cache is not None else output / "features"
    device = _device(config)
    timings, started = {}, time.perf_counter()
    unique = [cand] + [r for r in refs if r is not cand]
    kinds, left_out, computed = _features(unique, cache, config, device, progress)
    timings["features"] = time.perf_counter() - started
    gone = {(x["source"], x["id"]) for x in left_out}
    query, ref = _assemble([cand], cache, kinds, gone), _assemble(refs, cache, kinds, gone)
    exclude = None
    if config.include_candidates:
        exclude = np.arange(len(query.ids), dtype=np.int64) + (len(ref.ids) - len(query.ids))
    available = len(ref.ids) - (1 if config.include_candidates else 0)
    if available < 1 or not query.ids:
        raise ValueError(f"nothing to compare: {len(query.ids)} readable candidate(s) and {max(available, 0)} other reference(s)")
    k = min(config.top_k, available)
    if k < config.top_k:
        logger.warning("--top-k %d is more than the %d references each candidate has; listing all %d", config.top_k, available, k)
    results, compared = {}, {}
    for metric in ("l2", "fc7"):
        if metric in config.metrics:
            t = time.perf_counter()
            results[metric] = _search(metric, query, ref, k, exclude, config, device, progress, timings)
            timings[f"search_{metric}"] = time.perf_counter() - t
            compared[metric] = len(query.ids) * available
    if "dssim" in config.metrics:
        t = time.perf_counter()
        results["dssim"], compared["dssim"] = _dssim(query, ref, k, results, exclude, classes, config, progress)
        timings["search_dssim"] = time.perf_counter() - t
    neighbours = _neighbour_table(query, ref, {m: results[m] for m in config.metrics})
    status = review_status(neighbours, reviewed, config.thresholds, top_k=config.top_k, candidates=query.ids, metrics=list(config.metrics))
    timings["total"] = time.perf_counter() - started
    report = _report(config, cand, refs, query, ref, left_out, computed, k, compared, timings, status, device, reviews, len(reviewed))
    _write_outputs(output, neighbours, status, report)
    return NearDuplicateResult(neighbours, status, report)


def _report(config, cand, refs, query, ref, left_out, computed, k, compared, timings, status, device, reviews, n_reviewed) -> dict:
    settings = asdict(config)
    settings["metrics"] = list(config.metrics)
    return {
        "settings": settings,
        "device": device,
        "scales": {m: SCALES[m] for m in config.metrics},
        "candidates": {"source": cand.name, "images": len(cand), "searched": len(query.ids)},
        "references": [{"source": r.name, "kind": r.kind, "images": len(r)} for r in refs],
        "reference_rows": len(ref.ids),
        "left_out": left_out,
        "features_computed": computed,
        "top_k": {"asked": config.top_k, "listed": k},
        "pairs_compared": compared,
        "seconds": {name: round(value, 3) for name, value in timings.items()},
        "rates": _rates(timings, compared, computed),
        "reviews": {"file": str(reviews) if reviews is not None else None, "pairs": n_reviewed},
        "review_status": summary(status),
    }


def _rates(timings: dict, compared: dict, computed: int) -> dict:
    rates = {}
    if computed and timings.get("features"):
        rates["features_images_per_second"] = computed / timings["features"]
    for metric, pairs in compared.items():
        seconds = timings.get(f"search_{metric}")
        if seconds:
            rates[f"{metric}_pairs_per_second"] = pairs / seconds
    return rates


def _write_outputs(output: Path, neighbours: pa.Table, status: pa.Table, report: dict) -> None:
    targets = [output / name for name in OUTPUT_FILES]
    with owned_files(targets, COMMAND) as (n_tmp, s_tmp, r_tmp):
        write_table(neighbours, n_tmp)
        write_table(status, s_tmp)
        r_tmp.write_text(json.dumps(report, indent=2, default=float) + "\n", encoding="utf-8")

"""Run (model, dataset) jobs as Ray tasks: ``--ray local`` or ``--ray ADDRESS``.

Each job is one task: it loads its model and dataset, scores, and returns the result row and
the prediction arrays (a few MB at most). The driver stores each result as it arrives, in the
same output folder and format as a local run, so an interrupted Ray run resumes like any other
(and a cluster needs no shared file system for the output). Tasks ask for one GPU where the
cluster has GPUs, else one CPU. Paths in the jobs (local dataset folders, ``hf:`` folders,
label maps, the datasets cache) are made absolute on the driver; on a multi-machine cluster they
must exist on every machine, or use Hub ids.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Callable, Sequence

logger = logging.getLogger(__name__)


def _absolute(path: str) -> str:
    return str(Path(path).resolve()) if Path(path).exists() else path


def portable_job(job):
    """``job`` with its local paths made absolute (Ray workers may run in another directory)."""
    model = job.model
    target = _absolute(model.target)
    label_map = _absolute(model.label_map) if isinstance(model.label_map, str) else model.label_map
    checkpoint = _absolute(model.checkpoint) if model.checkpoint else model.checkpoint
    model = dataclasses.replace(model, source=f"{model.kind}:{target}", label_map=label_map, checkpoint=checkpoint)
    spec = dataclasses.replace(job.spec, path=_absolute(job.spec.path))
    return dataclasses.replace(job, model=model, spec=spec)


def _task(job, options):
    """The body of one Ray task (runs in a worker process)."""
    import logging as _logging

    from .jobs import evaluate_job

    _logging.basicConfig(level=_logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return evaluate_job(job, options)


def init_ray(address: str, num_cpus: int | None = None) -> bool:
    """Connect to (or start, for ``local``) a Ray cluster; True if this call started it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
    else:
        ray.init(address=address, log_to_driver=True)
    return True


def run_with_ray(jobs: Sequence, options, address: str, on_result: Callable) -> None:
    """Submit every job as a task and hand each result to ``on_result(job, row, arrays)`` as it lands."""
    import ray

    from .jobs import error_row

    started = init_ray(address)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        resources = {"num_gpus": 1} if gpus else {"num_cpus": 1}
        logger.info("Ray: %d jobs, each with %s (cluster: %s)", len(jobs), resources, ray.cluster_resources())
        task = ray.remote(max_retries=0, **resources)(_task)
        worker_options = dataclasses.replace(
            options,
            output=str(Path(options.output).resolve()),
            cache_dir=_absolute(options.cache_dir) if options.cache_dir else None,
            progress=False,
        )
        refs = {task.remote(portable_job(job), worker_options): job for job in jobs}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    row, arrays = ray.get(ref)
                    row = {**row, "source": job.model.source}  # as the user wrote it
                except Exception as e:  # noqa: BLE001 - a crashed task (e.g. worker killed) is an error row
                    row, arrays = error_row(job, options, e), None
                on_result(job, row, arrays)
    finally:
        if started:
            ray.shutdown()

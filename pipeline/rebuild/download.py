"""Download: every candidate's image → the image store of :mod:`pipeline.rebuild.stored_images`.

Images are fetched in parallel (``workers`` threads), with the retries and backoff of
:class:`pipeline.rebuild.flickr.Retrying`. A candidate whose image cannot be had (HTTP 404, not an
image, Flickr's "photo unavailable" placeholder, the retries used up) is recorded in
``failures.jsonl`` with the reason and left out of ``ingest``; it never stops the run. A re-run
continues: candidates already stored are not fetched again, failed ones are tried again.
"""

from __future__ import annotations

import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from pipeline.core.atomic import atomic_file
from pipeline.core.ownership import record_files
from pipeline.rebuild.flickr import FlickrError, RateLimiter, Retrying
from pipeline.rebuild.records import RecordError, read_records
from pipeline.rebuild.resumable import ProgressLog, read_log, resumable_folder
from pipeline.rebuild.stored_images import FAILURES, MANIFEST, NotAnImage, is_complete, store_image, write_lists

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

COMMAND = "download"
REPORT = "download.json"
PROGRESS = ".progress.jsonl"
UNAVAILABLE_MARK = "photo_unavailable"  # Flickr redirects a deleted photo's URL to this placeholder


@dataclass(frozen=True)
class Candidate:
    candidate_id: str
    wnid: str
    url: Optional[str]


@dataclass
class DownloadReport:
    """Counts of a download run; ``failures`` maps each reason kind to how many candidates had it."""

    output: Path
    candidates: int
    stored: int
    fetched_now: int
    failed: int
    failures: dict

    def record(self) -> dict:
        return {"candidates": self.candidates, "stored": self.stored, "fetched_now": self.fetched_now,
                "failed": self.failed, "failure_reasons": self.failures}


def read_candidate_urls(path: PathLike) -> list[Candidate]:
    """The candidates of a search output (``id_ours`` or ``candidate_id``, ``wnid``, ``url``), checked for duplicates."""
    found: dict[str, str] = {}
    candidates = []
    for where, record in read_records(path):
        cid = record.get("id_ours", record.get("candidate_id"))
        if not isinstance(cid, str) or not cid:
            raise RecordError(f"{where}: no candidate id (id_ours or candidate_id)")
        if cid in found:
            raise RecordError(f"{where}: duplicate candidate id {cid} (first at {found[cid]})")
        found[cid] = where
        candidates.append(Candidate(cid, str(record.get("wnid")), record.get("url")))
    return candidates


def fetch_one(http, retrying: Retrying, store: Path, candidate: Candidate) -> dict:
    """Fetch and store one candidate's image; a record with ``status`` stored or failed (and why)."""
    base = {"candidate_id": candidate.candidate_id, "url": candidate.url}
    if not candidate.url:
        return {**base, "status": "failed", "kind": "no url", "reason": "no url in the candidate record"}
    try:
        response = retrying.call(lambda: http.get(candidate.url), f"image of {candidate.candidate_id}")
    except FlickrError as e:
        return {**base, "status": "failed", "kind": "retries used up", "reason": str(e)}
    if response.status_code != 200:
        return {**base, "status": "failed", "kind": f"HTTP {response.status_code}", "reason": f"HTTP {response.status_code} from {response.url.host}"}
    if UNAVAILABLE_MARK in str(response.url):
        return {**base, "status": "failed", "kind": "unavailable", "reason": "photo no longer available (Flickr's placeholder image)"}
    try:
        record = store_image(store, candidate.candidate_id, candidate.wnid, response.content, url=candidate.url)
    except NotAnImage as e:
        content_type = response.headers.get("content-type", "unknown type")
        return {**base, "status": "failed", "kind": "not an image", "reason": f"{e} [{content_type}]"}
    return {**record, "status": "stored"}


def download(candidates: PathLike, output: PathLike, *, workers: int = 8, retries: int = 5, backoff: float = 1.0,
             timeout: float = 30.0, requests_per_second: Optional[float] = None, show_progress: bool = True) -> DownloadReport:
    """Fetch every candidate's image into the store ``output``; write ``images.jsonl``, ``failures.jsonl``, ``download.json``."""
    import httpx
    from tqdm.auto import tqdm

    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive whole number, got {workers!r}")
    wanted = read_candidate_urls(candidates)
    store = resumable_folder(output, COMMAND, inputs=[candidates])
    previous = {r["candidate_id"]: r for r in read_log(store / PROGRESS)}
    done = {cid: r for cid, r in previous.items() if r.get("status") == "stored" and is_complete(store, r)}
    todo = [c for c in wanted if c.candidate_id not in done]
    retrying = Retrying(retries, backoff, RateLimiter(requests_per_second))
    log = ProgressLog(store / PROGRESS)
    results = dict(done)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, headers={"User-Agent": "imagenetv2-hf download"}) as http, \
                ThreadPoolExecutor(max_workers=workers) as pool, tqdm(total=len(todo), unit="image", disable=None if show_progress else True) as bar:
            futures = [pool.submit(fetch_one, http, retrying, store, c) for c in todo]
            try:
                for future in as_completed(futures):
                    record = future.result()
                    log.append(record)
                    results[record["candidate_id"]] = record
                    bar.update(1)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    finally:
        log.close()
    return _finish(store, wanted, results, fetched_now=sum(1 for c in todo if results.get(c.candidate_id, {}).get("status") == "stored"))


def _finish(store: Path, wanted: list[Candidate], results: dict, fetched_now: int) -> DownloadReport:
    ids = {c.candidate_id for c in wanted}
    stored = [{k: v for k, v in r.items() if k != "status"} for cid, r in results.items() if cid in ids and r["status"] == "stored"]
    failures = [{k: r[k] for k in ("candidate_id", "url", "kind", "reason")} for cid, r in results.items() if cid in ids and r["status"] == "failed"]
    write_lists(store, stored, failures)
    kinds: dict[str, int] = {}
    for f in failures:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    report = DownloadReport(store, len(wanted), len(stored), fetched_now, len(failures), dict(sorted(kinds.items())))
    with atomic_file(store / REPORT, "w") as f:
        f.write(json.dumps(report.record(), indent=1) + "\n")
    record_files(store, COMMAND, [MANIFEST, FAILURES, REPORT])
    logger.info("image store %s: %d stored, %d failed", store, len(stored), len(failures))
    return report

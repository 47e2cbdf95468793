"""Search: Flickr queries for every class of a class list → candidate records (JSON Lines).

One query per lemma of each class with the settings of the search config
(:mod:`pipeline.rebuild.search_config`); the expansion steps run, in order, for the classes still
short of ``target_candidates``. The output folder holds::

    candidates.jsonl   one record per candidate, the fields of the released search results
    search.json        the config, and per class and step: queries run, pages, candidates found
    pages/             every API answer fetched, so that a re-run fetches no page twice

``id_ours`` is ``sha1(photo id + "flickr")``; a photo found for several classes becomes one
candidate per class with ``sha1("<photo id>,flickr,<wnid>")`` and ``also_found_for`` naming the
other classes. The records are derived from the stored pages at the end of every run, so a
resumed run never writes a record twice.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

from pipeline.core.atomic import atomic_file
from pipeline.core.ownership import record_files
from pipeline.rebuild.classes import ClassInfo, ClassList
from pipeline.rebuild.resumable import resumable_folder
from pipeline.rebuild.search_config import PlannedStep, SearchConfig

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

COMMAND = "search"
CANDIDATES = "candidates.jsonl"
REPORT = "search.json"
PAGES = "pages"
SEARCH_ENGINE = "flickr"
TIME = "%Y-%m-%d %H:%M:%S"


def candidate_id(photo_id: str, wnid: Optional[str] = None) -> str:
    """``id_ours``: sha1 of the photo id + ``flickr``; with ``wnid``, of ``"<id>,flickr,<wnid>"``.

    >>> candidate_id("4883924079")
    'a93094d8cd98f17e56a1ba6744709598c5e6ca74'
    """
    text = f"{photo_id}{SEARCH_ENGINE}" if wnid is None else f"{photo_id},{SEARCH_ENGINE},{wnid}"
    return hashlib.sha1(text.encode()).hexdigest()


def queries_for(kind: str, info: ClassInfo, hand_written: Mapping[str, Sequence[str]]) -> list[str]:
    """The queries of one step for one class (see ``data/search.yaml``).

    >>> info = ClassInfo("n01440764", "tench", ("tench", "Tinca tinca"), parent="cyprinid")
    >>> queries_for("parent-word", info, {}), queries_for("compound", info, {})
    (['tench cyprinid', 'Tinca tinca cyprinid'], ['Tincatinca'])
    """
    if kind == "lemmas":
        queries = list(info.lemmas)
    elif kind == "parent-word":
        queries = [f"{lemma} {info.parent}" for lemma in info.lemmas] if info.parent else []
    elif kind == "compound":
        queries = [lemma.replace(" ", "") for lemma in info.lemmas if " " in lemma.strip()]
    else:
        queries = list(hand_written.get(info.wnid, ()))
    return list(dict.fromkeys(q for q in queries if q.strip()))


class PageStore:
    """The API answers fetched so far, one file per request (the key never stored)."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(exist_ok=True)

    def _path(self, params: Mapping[str, object]) -> Path:
        digest = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()
        return self.folder / f"{digest}.json"

    def get(self, params: Mapping[str, object]) -> Optional[dict]:
        path = self._path(params)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text("utf-8"))
        except ValueError:
            return None

    def put(self, params: Mapping[str, object], answer: dict) -> dict:
        stored = {"params": dict(params), "fetched": datetime.now(timezone.utc).strftime(TIME), "photos": answer.get("photos", {})}
        with atomic_file(self._path(params), "w") as f:
            json.dump(stored, f)
        return stored


@dataclass
class StepSummary:
    """What one step did for one class."""

    queries: int = 0
    pages_fetched: int = 0
    pages_reused: int = 0
    results: int = 0
    without_url: int = 0
    candidates: int = 0


@dataclass
class SearchReport:
    """Counts per class and step, and where the records went."""

    output: Path
    candidates: int
    summary: dict[str, dict[str, StepSummary]] = field(default_factory=dict)
    cross_class_photos: int = 0

    def rows(self) -> list[tuple[str, str, int, int]]:
        """``(wnid, step, queries, candidates)`` for every step run."""
        return [(w, s, v.queries, v.candidates) for w, steps in self.summary.items() for s, v in steps.items()]


class _Searcher:
    """Runs the plan for each class, reading stored pages and fetching the missing ones."""

    def __init__(self, config: SearchConfig, pages: PageStore, client_factory: Callable[[], object]):
        self.config, self.pages, self.client_factory = config, pages, client_factory
        self.client = None

    def params(self, text: str, settings: Mapping[str, object], page: int) -> dict:
        c = self.config
        return {
            "text": text, "sort": c.sort, "per_page": c.per_page, "page": page, "extras": ",".join(c.extras),
            "min_taken_date": settings["min_taken_date"], "max_taken_date": settings["max_taken_date"],
            "min_upload_date": settings["min_uploaded_date"], "max_upload_date": settings["max_uploaded_date"],
        }

    def page(self, params: dict, summary: StepSummary) -> dict:
        stored = self.pages.get(params)
        if stored is not None:
            summary.pages_reused += 1
            return stored
        if self.client is None:
            self.client = self.client_factory()
        answer = self.client.call("flickr.photos.search", params)
        summary.pages_fetched += 1
        return self.pages.put(params, answer)

    def query(self, text: str, settings: Mapping[str, object], limit: int, summary: StepSummary) -> list[tuple[dict, str]]:
        """Up to ``limit`` results of one query, as ``(photo, fetched)``, paging in the sort order."""
        results: list[tuple[dict, str]] = []
        page = 1
        while len(results) < limit:
            stored = self.page(self.params(text, settings, page), summary)
            photos = stored["photos"].get("photo") or []
            results.extend((p, stored["fetched"]) for p in photos if isinstance(p, dict))
            if not photos or page >= int(stored["photos"].get("pages") or 0):
                break
            page += 1
        summary.queries += 1
        return results[:limit]


def photo_record(photo: Mapping, fetched: str, wnid: str, query: str, step: PlannedStep, config: SearchConfig, uploader: str) -> Optional[dict]:
    """The candidate record of a search result (``id_ours`` for a single class), None without an image URL."""
    url_type = next((u for u in config.url_order if photo.get(u)), None)
    if url_type is None or not photo.get("id"):
        return None
    size = url_type[len("url_"):]
    s = step.settings
    upload = photo.get("dateupload")
    return {
        "id_ours": candidate_id(str(photo["id"])), "id_search_engine": str(photo["id"]),
        "url": photo[url_type], "url_type": url_type, "wnid": wnid, "search_key": query,
        "search_engine": SEARCH_ENGINE, "uploader": uploader, "date_upload_our_db": fetched,
        "date_taken": photo.get("datetaken"),
        "date_upload_search_engine": datetime.fromtimestamp(int(upload), timezone.utc).strftime(TIME) if str(upload or "").isdigit() else None,
        "width": _int(photo.get("o_width") or photo.get(f"width_{size}")),
        "height": _int(photo.get("o_height") or photo.get(f"height_{size}")),
        "min_taken_date": s["min_taken_date"], "max_taken_date": s["max_taken_date"],
        "min_uploaded_date": s["min_uploaded_date"], "max_uploaded_date": s["max_uploaded_date"],
        "search_sort": config.sort, "max_images": s["max_images"], "search_step": step.name, "owner": photo.get("owner"),
    }


def _int(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def search_class(searcher: _Searcher, info: ClassInfo, hand_written: Mapping[str, Sequence[str]], uploader: str, progress=None) -> tuple[list[dict], dict[str, StepSummary]]:
    """The records of one class (first finder of a photo wins) and the summary of each step run."""
    config = searcher.config
    found: dict[str, dict] = {}
    summary: dict[str, StepSummary] = {}
    for step in config.plan():
        if step.index > 0 and len(found) >= config.target_candidates:
            break
        if step.queries == "hand-written" and not hand_written:
            continue  # no queries file: the step is skipped
        queries = queries_for(step.queries, info, hand_written)
        summary[step.name] = stats = StepSummary()
        limit = max(1, int(step.settings["max_images"]) // max(len(queries), 1))
        for query in queries:
            for photo, fetched in searcher.query(query, step.settings, limit, stats):
                stats.results += 1
                record = photo_record(photo, fetched, info.wnid, query, step, config, uploader)
                if record is None:
                    stats.without_url += 1
                elif record["id_search_engine"] not in found:
                    found[record["id_search_engine"]] = record
                    stats.candidates += 1
            if progress is not None:
                progress.update(1)
    return list(found.values()), summary


def resolve_cross_class(records: list[dict]) -> int:
    """Give photos found for several classes one id per class (``"<id>,flickr,<wnid>"``); return how many."""
    classes: dict[str, list[str]] = {}
    for r in records:
        classes.setdefault(r["id_search_engine"], []).append(r["wnid"])
    shared = {pid: sorted(w) for pid, w in classes.items() if len(w) > 1}
    for r in records:
        if r["id_search_engine"] in shared:
            r["id_ours"] = candidate_id(r["id_search_engine"], r["wnid"])
            r["also_found_for"] = [w for w in shared[r["id_search_engine"]] if w != r["wnid"]]
    return len(shared)


def load_hand_written(path: Optional[PathLike], classes: ClassList) -> dict[str, list[str]]:
    """Hand-written queries ``{wnid: [query, ...]}`` from a JSON or YAML file ({} without one)."""
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"hand-written queries file {path} does not exist")
    import yaml

    data = yaml.safe_load(path.read_text("utf-8"))  # YAML reads JSON too
    if not isinstance(data, dict) or not all(isinstance(v, list) and all(isinstance(q, str) for q in v) for v in data.values()):
        raise ValueError(f"hand-written queries {path}: expected an object {{wnid: [query, ...]}}")
    classes.check_ids(data, f"hand-written queries {path}")
    return {str(k): v for k, v in data.items()}


def search(output: PathLike, classes: ClassList, config: SearchConfig, client_factory: Callable[[], object], *,
           queries_file: Optional[PathLike] = None, uploader: Optional[str] = None, show_progress: bool = True) -> SearchReport:
    """Search every class, storing pages in ``output/pages``; write ``candidates.jsonl`` and ``search.json``.

    ``client_factory()`` makes the API client (a :class:`pipeline.rebuild.flickr.FlickrClient`);
    it is called only when a page is not stored yet.
    """
    from tqdm.auto import tqdm

    steps_file = next((s.file for s in config.plan() if s.queries == "hand-written" and s.file), None)
    hand_written = load_hand_written(queries_file or steps_file, classes)
    out = resumable_folder(output, COMMAND, inputs=[queries_file])
    searcher = _Searcher(config, PageStore(out / PAGES), client_factory)
    uploader = uploader or _user()
    records, summary = [], {}
    try:
        for info in classes.classes:
            with tqdm(desc=f"{info.wnid} {info.name}", unit="query", leave=False, disable=None if show_progress else True) as bar:
                found, summary[info.wnid] = search_class(searcher, info, hand_written, uploader, bar)
            records.extend(found)
    finally:
        if searcher.client is not None:
            searcher.client.close()
    shared = resolve_cross_class(records)
    report = SearchReport(out, len(records), summary, shared)
    _write_outputs(out, records, report, classes, config)
    return report


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _write_outputs(out: Path, records: list[dict], report: SearchReport, classes: ClassList, config: SearchConfig) -> None:
    with atomic_file(out / CANDIDATES, "w") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    per_class = Counter(r["wnid"] for r in records)
    body = {
        "classes": {"source": classes.source, "count": len(classes)},
        "config": config.record(),
        "candidates": len(records),
        "cross_class_photos": report.cross_class_photos,
        "per_class": {
            w: {"candidates": per_class.get(w, 0), "steps": {s: vars(v) for s, v in steps.items()}} for w, steps in report.summary.items()
        },
    }
    with atomic_file(out / REPORT, "w") as f:
        f.write(json.dumps(body, indent=1) + "\n")
    record_files(out, COMMAND, [CANDIDATES, REPORT])

"""Tasks: a pool's candidates → grids of images with hidden controls, for MTurk or a local annotation page.

Per class, grids of ``images_per_task`` (48) images: candidates of the class, ``positive`` (3)
original validation images of the class and ``negative`` (3) of its most similar class (the class
list's :meth:`~pipeline.rebuild.classes.ClassList.most_similar`; for ImageNet the second entry of
``wnid_to_most_similar_wnids.json``, as the original), at seeded random positions (rules in
:mod:`pipeline.rebuild.task_grid`). Every image is shown under a public name, an HMAC of its id
(:mod:`pipeline.rebuild.task_key`). The folder it writes is described there.

A follow-up round (``follow_up=True``) reads the pool's annotations and makes tasks only for
candidates with fewer than ``min_annotations`` counted annotations, plus tasks that carry extra
originals for classes with fewer than ``min_originals`` annotated originals (MatchedFrequency needs
them). The summary says why each task exists, and what the round costs on MTurk.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Optional, Union
from urllib.parse import quote

from pipeline.core.ownership import check_output_dir, owned_directory
from pipeline.rebuild.classes import ClassList, class_list_of, load_classes
from pipeline.rebuild.pool import load_pool
from pipeline.rebuild.task_grid import Grid, GridConfig, class_grids, original_grids
from pipeline.rebuild.task_key import (
    BATCH_INPUT, SUMMARY, TASK_PAGE, KeyEntry, Task, key_header, public_name, resolve_secret, task_id_of, write_tasks_and_key,
)
from pipeline.rebuild.task_page import task_page
from pipeline.rebuild.task_upload import image_url, original_image_store, upload_to_s3, write_upload
from pipeline.rebuild.tables import COUNTED_STATUSES

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
COMMAND = "tasks"
MTURK_FEE = 0.20  # MTurk's commission on the reward
MTURK_FEE_TEN_OR_MORE = 0.20  # added for HITs with 10 or more assignments
MTURK_MIN_FEE = 0.01  # per assignment


@dataclass(frozen=True)
class TasksConfig:
    """Everything a tasks run depends on besides the pool (recorded in the summary)."""

    grid: GridConfig = GridConfig()
    image_base_url: Optional[str] = None
    follow_up: bool = False
    min_annotations: int = 10
    min_originals: int = 20
    upload: bool = True

    def __post_init__(self):
        if self.min_annotations < 1 or self.min_originals < 0:
            raise ValueError(f"min_annotations must be >= 1 and min_originals >= 0, got {self.min_annotations}, {self.min_originals}")
        image_url(self.image_base_url, "0" * 32)  # checks the base


def mturk_cost(tasks: int, assignments: int, reward: float) -> dict:
    """What a batch costs on MTurk: reward plus commission (20%, +20% from 10 assignments, at least 0.01 USD).

    >>> mturk_cost(100, 10, 0.10)["total_usd"]
    140.0
    """
    rate = MTURK_FEE + (MTURK_FEE_TEN_OR_MORE if assignments >= 10 else 0.0)
    fee = max(MTURK_MIN_FEE, round(reward * rate, 4))
    n = tasks * assignments
    return {"tasks": tasks, "assignments": n, "reward_usd": reward, "fee_per_assignment_usd": fee,
            "rewards_usd": round(n * reward, 2), "fees_usd": round(n * fee, 2), "total_usd": round(n * (reward + fee), 2)}


def _classes_of(wnids, classes: Optional[ClassList]) -> ClassList:
    if classes is not None:
        missing = sorted(w for w in wnids if w not in classes)
        if missing:
            raise ValueError(f"the pool has class(es) {', '.join(missing[:5])} that the class list {classes.source} lacks; pass the pool's --classes file")
        return classes
    classes = load_classes()
    return classes if all(w in classes for w in wnids) else class_list_of(wnids)


def negative_classes(classes: ClassList, wnids, originals_by_class: Mapping[str, list]) -> tuple[dict, list]:
    """Per class: the class its negative controls come from, and notes where the most similar had none."""
    chosen, notes = {}, []
    with_originals = [w for w in sorted(originals_by_class) if originals_by_class[w]]
    for wnid in wnids:
        similar = [w for w in classes.most_similar(wnid) if originals_by_class.get(w)]
        if similar:
            chosen[wnid] = similar[0]
            if similar[0] != (classes.most_similar(wnid) or (None,))[0]:
                notes.append(f"{wnid}: negatives from {similar[0]} (its most similar class has no originals in the pool)")
            continue
        others = [w for w in with_originals if w != wnid]
        if not others:
            raise ValueError(f"class {wnid}: no other class has originals in the pool, so there are no negative controls")
        chosen[wnid] = next((w for w in others if w > wnid), others[0])
        notes.append(f"{wnid}: negatives from {chosen[wnid]} (no similar class has originals in the pool)")
    return chosen, notes


def _counted_annotations(pool) -> Counter:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pool.annotations
    table = table.filter(pc.is_in(table.column("status"), value_set=pa.array(COUNTED_STATUSES)))
    return Counter(zip(table.column("image_id").to_pylist(), table.column("wnid").to_pylist()))


def build_grids(pool, config: TasksConfig, classes: ClassList, notes: list) -> tuple[list[Grid], dict]:
    """All grids of a round, and per class the class its negatives come from."""
    candidates, originals = defaultdict(list), defaultdict(list)
    for cid, wnid in zip(pool.candidates.column("candidate_id").to_pylist(), pool.candidates.column("wnid").to_pylist()):
        candidates[wnid].append(cid)
    for oid, wnid in zip(pool.originals.column("image_id").to_pylist(), pool.originals.column("wnid").to_pylist()):
        originals[wnid].append(oid)
    wnids = sorted(candidates)
    negative_of, fallback_notes = negative_classes(classes, wnids, originals)
    notes.extend(fallback_notes)
    counts = _counted_annotations(pool) if config.follow_up else Counter()
    grids: list[Grid] = []
    for wnid in wnids:
        cands, positives, negatives = sorted(candidates[wnid]), sorted(originals[wnid]), sorted(originals[negative_of[wnid]])
        if not positives:
            notes.append(f"{wnid}: no originals of the class in the pool, so its tasks have no positive controls")
        if len(cands) < config.grid.candidate_slots:
            notes.append(f"{wnid}: only {len(cands)} candidates, fewer than the {config.grid.candidate_slots} a grid holds")
        if not config.follow_up:
            grids += class_grids(wnid, cands, positives, negatives, config.grid, reason="initial")
            continue
        grids += _follow_up_grids(wnid, cands, positives, negatives, counts, config)
    return grids, negative_of


def _follow_up_grids(wnid, cands, positives, negatives, counts: Counter, config: TasksConfig) -> list[Grid]:
    short = [c for c in cands if counts[(c, wnid)] < config.min_annotations]
    fill = sorted((c for c in cands if c not in set(short)), key=lambda c: (counts[(c, wnid)], c))
    grids = []
    if short:
        reason = f"candidates with fewer than {config.min_annotations} annotations"
        grids += class_grids(wnid, short, positives, negatives, config.grid, reason=reason, fill=fill)
    annotated = [o for o in positives if counts[(o, wnid)] >= config.min_annotations]
    if len(annotated) < config.min_originals:
        extra = sorted((o for o in positives if o not in set(annotated)), key=lambda o: (counts[(o, wnid)], o))
        reason = f"class has {len(annotated)} of {config.min_originals} annotated originals"
        if extra:
            grids += original_grids(wnid, extra[: config.min_originals - len(annotated)], cands, negatives, config.grid, reason=reason)
    return grids


def name_grids(grids: list[Grid], secret: bytes, owner_class: Mapping[str, str]) -> tuple[list[Task], dict[str, KeyEntry]]:
    """Tasks under public names, and the key entries of every name."""
    tasks, entries = [], {}
    for grid in grids:
        names = []
        for image_id, role in grid.images:
            name = public_name(secret, grid.wnid, image_id)
            entries[name] = KeyEntry(name, image_id, role, owner_class[image_id])
            names.append(name)
        tasks.append(Task(task_id_of(secret, grid.wnid, [i for i, _ in grid.images]), grid.wnid, tuple(names), grid.reason))
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("two tasks have the same images; this pool gives identical grids (report this)")
    return tasks, entries


def batch_rows(tasks: list[Task], classes: ClassList, config: TasksConfig) -> list[dict]:
    """The MTurk batch input: one row per task (class facts, and one URL per grid position)."""
    rows = []
    for task in tasks:
        info = classes.info(task.wnid)
        lemma = (info.lemmas or (info.name,))[0]
        row = {"task_id": task.task_id, "wnid": task.wnid, "class_name": info.name, "gloss": info.gloss or info.name,
               "wikipedia_url": "https://en.wikipedia.org/wiki/" + quote(lemma.replace(" ", "_"))}
        urls = [image_url(config.image_base_url, name) for name in task.images]
        urls += [""] * (config.grid.images_per_task - len(urls))
        row.update({f"image_{k}_url": url for k, url in enumerate(urls, start=1)})
        rows.append(row)
    return rows


def _write_batch_input(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _image_sources(pool, entries: Mapping[str, KeyEntry], original_images: Optional[PathLike]) -> dict:
    store = pool.image_bytes() if pool.images is not None else {}
    originals = original_image_store(original_images) if original_images is not None else {}
    sources, missing = {}, []
    for name, entry in entries.items():
        source = store.get(entry.id) if entry.role == "candidate" else originals.get(entry.id)
        if source is None:
            missing.append(entry)
        sources[name] = source
    if missing:
        first = missing[0]
        where = "the pool's images table" if first.role == "candidate" else "--original-images"
        raise ValueError(f"{len(missing)} image(s) have no file, e.g. {first.role} {first.id} (not in {where}); "
                         "pass --original-images DIR|FILE.parquet for the controls, or --no-upload")
    return sources


def summarize(tasks: list[Task], entries: Mapping[str, KeyEntry], negative_of: dict, config: TasksConfig, notes: list) -> dict:
    """The round in numbers: tasks per reason, images per class, the cost, the configuration."""
    per_class = defaultdict(lambda: {"tasks": 0, "candidates": set(), "positives": set(), "negatives": set()})
    for task in tasks:
        record = per_class[task.wnid]
        record["tasks"] += 1
        for name in task.images:
            entry = entries[name]
            record[{"candidate": "candidates", "positive": "positives", "negative": "negatives"}[entry.role]].add(entry.id)
    classes = {w: {"tasks": r["tasks"], "candidates": len(r["candidates"]), "positives": len(r["positives"]),
                   "negatives": len(r["negatives"]), "negative_class": negative_of[w]} for w, r in sorted(per_class.items())}
    shown = [c["candidates"] for c in classes.values()] or [0]
    return {
        "tasks": len(tasks), "classes": len(classes),
        "reasons": dict(Counter(t.reason for t in tasks)),
        "images_per_class": {"min": min(shown), "median": statistics.median(shown), "max": max(shown)},
        "cost": mturk_cost(len(tasks), config.grid.assignments, config.grid.reward),
        "config": {**asdict(config.grid), **{k: v for k, v in asdict(config).items() if k != "grid"}},
        "notes": notes, "per_class": classes,
    }


def make_tasks(pool_folder: PathLike, output: PathLike, config: TasksConfig = TasksConfig(), *,
               original_images: Optional[PathLike] = None, classes: Optional[ClassList] = None,
               environ: Mapping[str, str] = os.environ, progress=lambda it: it) -> dict:
    """Write the tasks folder ``output`` for the pool in ``pool_folder``; return the summary.

    >>> import tempfile, pathlib
    >>> from pipeline.toys.annotators import write_toy_pool
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = write_toy_pool(root / "pool", n_classes=2, candidates_per_class=50)
    >>> summary = make_tasks(root / "pool", root / "tasks", TasksConfig(upload=False), environ={})
    >>> summary["tasks"], summary["images_per_class"]["min"], summary["cost"]["total_usd"]
    (4, 50, 5.6)
    """
    output = check_output_dir(output, COMMAND, inputs=[pool_folder, original_images])
    published = sorted(p.name for p in output.glob("hits-*.jsonl")) if output.is_dir() else []
    if published:  # replacing it would lose the record of HITs workers may be doing
        raise ValueError(f"refusing to replace {output}: its tasks were published to MTurk ({', '.join(published)}); pass another --output")
    tables = ["candidates", "originals"] + (["annotations"] if config.follow_up else []) + (["images"] if config.upload else [])
    pool = load_pool(pool_folder, tables)
    class_list = _classes_of(set(pool.candidates.column("wnid").to_pylist()), classes)
    notes: list = []
    grids, negative_of = build_grids(pool, config, class_list, notes)
    if not grids:
        raise ValueError("no tasks to make: every candidate and class already has enough annotations" if config.follow_up
                         else "no tasks to make: the pool has no candidates")
    secret, from_env = resolve_secret(environ)
    owner_class = dict(zip(pool.candidates.column("candidate_id").to_pylist(), pool.candidates.column("wnid").to_pylist()))
    owner_class.update(zip(pool.originals.column("image_id").to_pylist(), pool.originals.column("wnid").to_pylist()))
    tasks, entries = name_grids(grids, secret, owner_class)
    summary = summarize(tasks, entries, negative_of, config, notes)
    summary["secret_from"] = key_header(secret, from_env)["secret_from"]
    with owned_directory(output, COMMAND, inputs=[pool_folder, original_images]) as tmp:
        if config.upload:
            write_upload(tmp, _image_sources(pool, entries, original_images), progress)
            if config.image_base_url and config.image_base_url.startswith("s3://"):
                upload_to_s3(tmp, config.image_base_url, entries, progress)
        write_tasks_and_key(tmp, tasks, entries.values(), key_header(secret, from_env))
        _write_batch_input(tmp / BATCH_INPUT, batch_rows(tasks, class_list, config))
        (tmp / TASK_PAGE).write_text(task_page(config.grid.images_per_task), encoding="utf-8")
        (tmp / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    logger.info("wrote %d tasks for %d classes to %s", summary["tasks"], summary["classes"], output)
    return summary


def format_summary(summary: dict) -> str:
    """The summary as a maintainer reads it (the command prints this)."""
    cost, per = summary["cost"], summary["images_per_class"]
    lines = [f"{summary['tasks']:,} tasks for {summary['classes']:,} classes"]
    lines += [f"  {count:,} {reason}" for reason, count in summary["reasons"].items()]
    lines.append(f"candidates per class: min {per['min']}, median {per['median']:g}, max {per['max']}")
    lines.append(f"cost on MTurk: {cost['assignments']:,} assignments x ({cost['reward_usd']:.2f} reward + "
                 f"{cost['fee_per_assignment_usd']:.2f} fee) = {cost['total_usd']:,.2f} USD")
    lines += [f"note: {n}" for n in summary["notes"][:10]]
    if len(summary["notes"]) > 10:
        lines.append(f"note: ... and {len(summary['notes']) - 10} more (see summary.json)")
    return "\n".join(lines)

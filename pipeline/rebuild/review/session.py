"""A review session: the pool, the revision under review, the images, the state folder, checked at start.

:func:`open_session` does every check before the server starts: the revision must match the
pool (each of its images a candidate of the pool, under the same class, with an image); the
review folder must be new, empty, or an earlier review of the same revision (then the review
resumes); ``starting_from`` must be another review folder.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from pipeline.core.atomic import atomic_write_text, pid_alive
from pipeline.core.integrity import file_digest
from pipeline.core.ownership import OutputError, check_output_dir, owner, record_files
from pipeline.rebuild.classes import ClassList, load_classes
from pipeline.rebuild.pool import SELECTION_FREQUENCIES, load_pool
from pipeline.rebuild.review.carry_over import carried_state
from pipeline.rebuild.review.images import ImageStore, merged_index
from pipeline.rebuild.review.neighbours import Neighbours, load_neighbours
from pipeline.rebuild.review.state import COMMAND, ReviewState, now
from pipeline.rebuild.review_folder import MANIFEST, REVISION, STATE_FILES, dumps_state
from pipeline.rebuild.revision import Revision, load_revision

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
ORIGINALS_SHOWN = 10
METADATA_FIELDS = ("search_key", "search_engine", "id_search_engine", "date_taken", "date_upload_search_engine", "uploader", "width", "height", "url")


@dataclass
class Session:
    """Everything the server needs, loaded and checked."""

    revision: Revision
    classes: ClassList
    wnids: list  # the revision's classes, in order
    images_of_class: dict
    originals_of_class: dict  # wnid → the (up to) ten originals shown, the same on every visit
    metadata: dict  # candidate id → what the page shows on hover
    store: ImageStore
    state: ReviewState
    neighbours: Optional[Neighbours] = None
    info: dict = field(default_factory=dict)


def _images_of_class(revision: Revision, wnid_of: Mapping[str, str], pool_root: Path, has_image) -> dict:
    images: dict[str, list] = {w: [] for w in revision.config.class_wnids}
    for i, (cid, wnid) in enumerate(revision.image_filenames):
        where = f"revision {revision.output_filename} does not match the pool {pool_root}: image_filenames[{i}] {cid}"
        if cid not in wnid_of:
            raise ValueError(f"{where} is not a candidate of the pool; review a revision with the pool it was sampled from")
        if wnid_of[cid] != wnid:
            raise ValueError(f"{where} is listed under {wnid}, but the pool has it under {wnid_of[cid]}")
        if not has_image(cid):
            raise ValueError(f"{where} has no image in the pool's image store ({pool_root / 'images.parquet'})")
        images.setdefault(wnid, []).append(cid)
    return {w: ids for w, ids in images.items() if ids}


def choose_originals(ids: Sequence[str], wnid: str, available, seed: int = 0, k: int = ORIGINALS_SHOWN) -> list:
    """The originals of a class to show: ``k`` of them, chosen by a seed that depends on the class only.

    Originals with an image come first. The same inputs give the same choice on every visit.

    >>> choose_originals([f"v{i}" for i in range(20)], "n01440764", lambda i: True, k=3) == choose_originals(
    ...     [f"v{i}" for i in range(20)], "n01440764", lambda i: True, k=3)
    True
    """
    ids = sorted(ids)
    with_image = [i for i in ids if available(i)]
    without = [i for i in ids if not available(i)]
    rng = np.random.default_rng([seed, zlib.crc32(wnid.encode())])
    chosen = [with_image[j] for j in sorted(rng.permutation(len(with_image))[:k])]
    return chosen + without[: max(0, k - len(chosen))]


def _metadata(pool, selection_frequency: Mapping) -> dict:
    columns = pool.candidates.select(["candidate_id", "wnid", *METADATA_FIELDS]).to_pydict()
    out = {}
    for row in zip(*columns.values()):
        cid, values = row[0], dict(zip(("wnid", *METADATA_FIELDS), row[1:]))
        entry = {k: v for k, v in values.items() if v is not None}
        if (values.get("search_engine") or "").lower() == "flickr" and values.get("id_search_engine"):
            entry["flickr"] = f"https://www.flickr.com/photo.gne?id={values['id_search_engine']}"
        if cid in selection_frequency:
            entry["selection_frequency"], entry["num_annotations"] = selection_frequency[cid]
        out[cid] = entry
    return out


def _selection_frequencies(pool_root: Path) -> dict:
    from pipeline.rebuild.tables import read_table

    path = pool_root / SELECTION_FREQUENCIES
    if not path.is_file():
        return {}
    table = read_table(path, "selection_frequencies").to_pydict()
    return {
        i: (round(f, 4), n)
        for i, o, f, n in zip(table["image_id"], table["is_original"], table["selection_frequency"], table["num_shown"])
        if not o
    }



LOCK = ".review-server.pid"


def claim_folder(output: Path) -> None:
    """Refuse a review folder that another running review server writes to; else mark it as this process's.

    One server per folder, so that its lock orders every write; the tabs share that server.
    """
    import atexit

    lock = output / LOCK
    try:
        pid = int(lock.read_text().strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None and pid != os.getpid() and pid_alive(pid):
        raise ValueError(f"another review server (process {pid}) is writing to {output}; open its URL in more tabs instead, or stop it first")
    lock.write_text(f"{os.getpid()}\n")
    atexit.register(lambda: lock.unlink(missing_ok=True) if lock.is_file() and lock.read_text().strip() == str(os.getpid()) else None)


def _open_folder(output: Path, revision_path: Path, pool_root: Path, starting_from: Optional[Path], images_of_class) -> ReviewState:
    digest = file_digest(revision_path).sha256
    manifest_path = output / MANIFEST
    if manifest_path.is_file() and owner(output) is not None:
        manifest = json.loads(manifest_path.read_text("utf-8"))
        if manifest.get("revision_sha256") != digest:
            raise ValueError(
                f"{output} holds the review of {manifest.get('revision')}, not of {revision_path.name}; pass a new --output "
                f"(with --starting-from {output} to carry its marks over)"
            )
        if starting_from is not None and manifest.get("starting_from") != starting_from.name:
            raise ValueError(f"{output} was started from {manifest.get('starting_from')}, not {starting_from}; drop --starting-from to resume it")
        logger.info("resuming the review in %s", output)
        claim_folder(output)
        return ReviewState(output, images_of_class)
    check_output_dir(output, COMMAND, inputs=[pool_root, revision_path, starting_from])
    if starting_from is not None and not starting_from.is_dir():
        raise FileNotFoundError(f"--starting-from {starting_from} is not a folder; pass the --output folder of an earlier review")
    output.mkdir(parents=True, exist_ok=True)
    claim_folder(output)
    if starting_from is not None:
        for name, data in carried_state(starting_from, images_of_class).items():
            atomic_write_text(output / name, dumps_state(name, data))
    atomic_write_text(output / REVISION, revision_path.read_text("utf-8"))
    manifest = {"revision": revision_path.name, "revision_sha256": digest, "pool": pool_root.name,
                "starting_from": starting_from.name if starting_from is not None else None, "created": now()}
    atomic_write_text(manifest_path, dumps_state(MANIFEST, manifest))
    record_files(output, COMMAND, [REVISION, MANIFEST])
    state = ReviewState(output, images_of_class)
    state.write_all()
    return state


def open_session(
    pool: PathLike,
    revision: PathLike,
    output: PathLike,
    *,
    originals: Sequence[PathLike] = (),
    references: Sequence[PathLike] = (),
    near_duplicates: Optional[PathLike] = None,
    starting_from: Optional[PathLike] = None,
    classes: Optional[PathLike] = None,
) -> Session:
    """Load and check everything; create (or resume) the review folder ``output``."""
    pool_root, revision_path, output = Path(pool), Path(revision), Path(output)
    if starting_from is not None and Path(starting_from).resolve() == output.resolve():
        raise OutputError(f"--starting-from and --output are both {output}; the new review needs its own folder")
    if not revision_path.is_file():
        raise FileNotFoundError(f"revision {revision_path} does not exist; pass the .json file that `sample` wrote")
    loaded = load_pool(pool_root, ("candidates", "originals", "images"))
    the_revision = load_revision(revision_path)
    store = ImageStore(loaded.image_bytes(), merged_index(originals), merged_index(references))
    wnid_of = dict(zip(loaded.candidates.column("candidate_id").to_pylist(), loaded.candidates.column("wnid").to_pylist()))
    images_of_class = _images_of_class(the_revision, wnid_of, pool_root, lambda c: store.has("candidate", c))
    originals_by_class: dict[str, list] = {}
    for image_id, wnid in zip(loaded.originals.column("image_id").to_pylist(), loaded.originals.column("wnid").to_pylist()):
        originals_by_class.setdefault(wnid, []).append(image_id)
    shown = {w: choose_originals(originals_by_class.get(w, []), w, lambda i: store.has("original", i)) for w in images_of_class}
    neighbours = None
    if near_duplicates is not None:
        first = [cid for cid, _ in the_revision.image_filenames]
        neighbours = load_neighbours(Path(near_duplicates), the_revision.config.near_duplicate_review_targets, set(wnid_of), first)
    state = _open_folder(output, revision_path, pool_root, Path(starting_from) if starting_from else None, images_of_class)
    return Session(
        revision=the_revision,
        classes=load_classes(classes),
        wnids=list(images_of_class),
        images_of_class=images_of_class,
        originals_of_class=shown,
        metadata=_metadata(loaded, _selection_frequencies(pool_root)),
        store=store,
        state=state,
        neighbours=neighbours,
        info={"revision": the_revision.output_filename, "rule": the_revision.config.rule, "pool": pool_root.name,
              "output": output.name, "originals_given": bool(originals), "state_files": list(STATE_FILES)},
    )

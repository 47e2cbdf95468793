"""Carry-over: start the review of a new revision from the review of the previous one.

As the original pipeline's review initialisation did:

- a class keeps ``reviewed`` only if it holds exactly the same images as before and was not
  problematic (a class with a new image must be looked at again); ``problematic`` is kept;
- images that the new revision still has keep their "seen" stamp; its new images have none,
  so the page shows them as new;
- the blacklist (with its marks), the confirmed near-duplicates and the reviewed pairs are
  facts about the pool, not about one revision: they are kept whole, so that the next
  ``sample --review`` still excludes every image rejected in any earlier round.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from pipeline.rebuild.review_folder import (
    BLACKLIST,
    CLASS_LOG,
    CLASS_STATE,
    MARKS,
    NEAR_DUPLICATES,
    REVIEWED_IMAGES,
    REVIEWED_PAIRS,
    REVISION,
    read_json_lines,
    read_json_object,
)


def carried_state(previous: Path, images_of_class: Mapping[str, Sequence[str]]) -> dict:
    """The state files' contents for a new review, from the review folder ``previous``.

    >>> import tempfile, pathlib
    >>> old = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (old / "revision.json").write_text(json.dumps({"image_filenames": [["a", "n1"], ["b", "n2"]]}))
    >>> _ = (old / "class_state.json").write_text(json.dumps({"n1": {"reviewed": True, "problematic": False},
    ...                                                       "n2": {"reviewed": True, "problematic": False}}))
    >>> _ = (old / "blacklist.json").write_text(json.dumps({"c": "wrong class"}))
    >>> state = carried_state(old, {"n1": ["a"], "n2": ["d"]})
    >>> state["class_state.json"], state["blacklist.json"]
    ({'n1': {'problematic': False, 'reviewed': True}, 'n2': {'problematic': False, 'reviewed': False}}, {'c': 'wrong class'})
    """
    previous = Path(previous)
    if not (previous / REVISION).is_file():
        raise FileNotFoundError(f"{previous} is not a review folder (no {REVISION}); pass the --output folder of an earlier `review`")
    old_revision = json.loads((previous / REVISION).read_text("utf-8"))
    old_images: dict[str, set] = {}
    for cid, wnid in old_revision.get("image_filenames", ()):
        old_images.setdefault(wnid, set()).add(cid)
    old_states = read_json_object(previous / CLASS_STATE, "{wnid: {reviewed, problematic}}")
    old_log = read_json_object(previous / CLASS_LOG, "{wnid: {reviewer, date}}")
    seen = read_json_object(previous / REVIEWED_IMAGES, "{candidate_id: {reviewer, date}}")
    states, log = {}, {}
    for wnid, ids in images_of_class.items():
        old = old_states.get(wnid, {})
        problematic = bool(old.get("problematic", False))
        same = old_images.get(wnid, set()) == set(ids)
        states[wnid] = {"problematic": problematic, "reviewed": bool(old.get("reviewed", False)) and same and not problematic}
        if wnid in old_log:
            log[wnid] = old_log[wnid]
    current = {cid for ids in images_of_class.values() for cid in ids}
    return {
        BLACKLIST: read_json_object(previous / BLACKLIST, "{candidate_id: reason}"),
        MARKS: read_json_object(previous / MARKS, "{candidate_id: mark}"),
        NEAR_DUPLICATES: read_json_object(previous / NEAR_DUPLICATES, "{candidate_id: [reference ids]}"),
        REVIEWED_PAIRS: read_json_lines(previous / REVIEWED_PAIRS, "a reviewed pair"),
        CLASS_STATE: states,
        CLASS_LOG: log,
        REVIEWED_IMAGES: {cid: stamp for cid, stamp in seen.items() if cid in current},
    }

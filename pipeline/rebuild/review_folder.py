"""The data model of a review folder: what the review app writes and ``sample --review`` reads.

The review app (``python -m pipeline review``) writes, each file atomically as it is clicked::

    blacklist.json        {candidate_id: reason}: the original pipeline's blacklist format
    marks.json            {candidate_id: {"reason", "note", "wnid", "reviewer", "date"}}: who, when, why
    near_duplicates.json  {candidate_id: [reference ids]}: confirmed pairs, the original's format
    reviewed_pairs.jsonl  one line per pair a person looked at: candidate_id, metric, reference_id,
                          reference_source, reviewer, date, decision (near_duplicate or distinct);
                          the format ``near-duplicates --reviews`` reads (docs/near_duplicates.md)
    class_state.json      {wnid: {"reviewed": bool, "problematic": bool}}: the original's format
    class_log.json        {wnid: {"reviewer", "date"}}: who changed a class's state last
    reviewed_images.json  {candidate_id: {"reviewer", "date"}}: images seen when their class was marked reviewed
    revision.json         a copy of the revision under review (``sample --review`` chains from it)
    review.json           what was reviewed: the revision's name and sha256, the pool, the carry-over source

This module is shared by the review app and ``sample`` so that neither stage imports the other.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

BLACKLIST = "blacklist.json"
MARKS = "marks.json"
NEAR_DUPLICATES = "near_duplicates.json"
REVIEWED_PAIRS = "reviewed_pairs.jsonl"
CLASS_STATE = "class_state.json"
CLASS_LOG = "class_log.json"
REVIEWED_IMAGES = "reviewed_images.json"
REVISION = "revision.json"
MANIFEST = "review.json"
STATE_FILES = (BLACKLIST, MARKS, NEAR_DUPLICATES, REVIEWED_PAIRS, CLASS_STATE, CLASS_LOG, REVIEWED_IMAGES)

# The final review's reasons (paper, Section 3), plus the two the review app adds; key → label.
REASONS = {
    "not_representative": "not representative of the class",
    "drawing": "cartoon, painting, drawing or rendering",
    "different_distribution": "clearly different distribution",
    "unclear": "unclear, blurry, occluded, edited or small object",
    "wrong_class": "wrong class",
    "near_duplicate": "near-duplicate",
}


def read_json_object(path: Path, what: str) -> dict:
    """The JSON object in ``path`` ({} when the file is absent); a clear error when it is not one."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); it should hold {what}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object ({what}), got {type(data).__name__}")
    return data


def read_json_lines(path: Path, what: str) -> list:
    """The objects of a JSON Lines file ([] when the file is absent); a clear error naming a bad line."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} line {number}: not valid JSON ({e.msg}); each line should hold {what}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path} line {number}: expected a JSON object ({what})")
        rows.append(row)
    return rows


def read_state_file(path: Path):
    """A state file's contents: a list for the JSON Lines file, an object for the others."""
    if path.name == REVIEWED_PAIRS:
        return read_json_lines(path, "a reviewed pair")
    return read_json_object(path, path.name)


def dumps_state(name: str, data) -> str:
    """A state file's text: one sorted JSON object, or one JSON object per line."""
    if name == REVIEWED_PAIRS:
        return "".join(json.dumps(row, sort_keys=True) + "\n" for row in data)
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


@dataclass(frozen=True)
class ReviewFolder:
    """What ``sample`` takes from a review folder: the blacklist, confirmed pairs, the revision reviewed."""

    root: Path
    blacklist: Mapping[str, str]
    near_duplicates: Mapping[str, list]

    @property
    def revision_path(self) -> Optional[Path]:
        path = self.root / REVISION
        return path if path.is_file() else None

    def pair_rows(self) -> list[dict]:
        """The confirmed pairs as rows of the ``near_duplicates`` table (image_id, duplicate_id)."""
        return [{"image_id": c, "duplicate_id": r} for c, refs in sorted(self.near_duplicates.items()) for r in refs]

    def input_files(self) -> dict[str, Path]:
        """The files ``sample`` reads from the folder, by the name its report gives them."""
        files = {"review_blacklist": self.root / BLACKLIST, "review_near_duplicates": self.root / NEAR_DUPLICATES}
        return {name: path for name, path in files.items() if path.is_file()}

    def merged(self, blacklist: Mapping[str, Optional[str]], pairs):
        """A blacklist {id: reason} and a ``near_duplicates`` table (or None), with the review's added."""
        import pyarrow as pa

        from pipeline.rebuild.tables import from_rows

        ids = {**dict(blacklist), **self.blacklist}
        rows = self.pair_rows()
        if not rows:
            return ids, pairs
        reviewed = from_rows(rows, "near_duplicates", str(self.root / NEAR_DUPLICATES))
        return ids, reviewed if pairs is None else pa.concat_tables([pairs, reviewed])

    def report(self, previous, revision, decisions) -> dict:
        """The ``review`` section of ``sample``'s report: what the review removed, and per class what was replaced."""
        decision_of = dict(zip(decisions.column("candidate_id").to_pylist(), decisions.column("decision").to_pylist()))
        previous_images = [list(p) for p in previous.image_filenames] if previous is not None else []
        section = {
            "folder": self.root.name,
            "blacklisted": len(self.blacklist),
            "confirmed_near_duplicates": sum(len(r) for r in self.near_duplicates.values()),
            "reviewed_revision": previous.output_filename if previous is not None else None,
        }
        return section | replacements(previous_images, [list(p) for p in revision.image_filenames], self, decision_of)


def read_review_folder(folder: PathLike) -> ReviewFolder:
    """Read a review folder written by the review app.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / BLACKLIST).write_text('{"' + "a" * 40 + '": "wrong class"}')
    >>> review = read_review_folder(root)
    >>> list(review.blacklist.values()), review.pair_rows(), review.revision_path
    (['wrong class'], [], None)
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"review folder {root} does not exist; run `python -m pipeline review ... --output {root}` first")
    if not (root / MANIFEST).is_file() and not any((root / name).is_file() for name in STATE_FILES):
        raise ValueError(f"{root} is not a review folder (no {MANIFEST}, no {BLACKLIST}); pass the --output folder of `review`")
    blacklist = read_json_object(root / BLACKLIST, "{candidate_id: reason}")
    pairs = read_json_object(root / NEAR_DUPLICATES, "{candidate_id: [reference ids]}")
    for key, value in blacklist.items():
        if not isinstance(value, str):
            raise ValueError(f"{root / BLACKLIST}: the reason of {key} is {value!r}; expected a string")
    for key, value in pairs.items():
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise ValueError(f"{root / NEAR_DUPLICATES}: {key} maps to {value!r}; expected a list of reference ids")
    return ReviewFolder(root, blacklist, pairs)


def replacements(previous: list, current: list, review: ReviewFolder, decision_of: Mapping[str, str]) -> dict:
    """Per class, how many images of ``previous`` the new revision replaced, and why.

    ``previous`` and ``current`` are ``[candidate id, wnid]`` lists; ``decision_of`` maps a
    candidate to what the sampling rule decided about it (the decisions table). The reason of
    a blacklisted image is its review reason.

    >>> review = ReviewFolder(Path("."), {"a": "wrong class"}, {"b": ["ILSVRC2012_val_00000001.JPEG"]})
    >>> replacements([["a", "n1"], ["b", "n1"], ["c", "n2"]], [["c", "n2"], ["d", "n1"]], review,
    ...              {"a": "blacklisted", "b": "near_duplicate"})
    {'replaced': 2, 'per_class': {'n1': {'near-duplicate': 1, 'wrong class': 1}}}
    """
    kept = {cid for cid, _ in current}
    per_class: dict[str, dict[str, int]] = {}
    for cid, wnid in previous:
        if cid in kept:
            continue
        if cid in review.blacklist:
            reason = review.blacklist[cid]
        else:
            reason = decision_of.get(cid, "not_sampled").replace("_", "-")
        counts = per_class.setdefault(wnid, {})
        counts[reason] = counts.get(reason, 0) + 1
    per_class = {w: dict(sorted(c.items())) for w, c in sorted(per_class.items())}
    return {"replaced": sum(sum(c.values()) for c in per_class.values()), "per_class": per_class}

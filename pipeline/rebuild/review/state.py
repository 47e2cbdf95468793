"""The review's state: every mark applied one at a time under a lock and written atomically.

Each click of the page is one small update (one image's mark, one class's state, one
near-duplicate pair), applied to the state in memory while holding a lock and then written
to its file in the review folder by an atomic rename. Two browser tabs therefore never
overwrite each other's marks: a tab sends what changed, never the whole state. The file
formats are those of :mod:`pipeline.rebuild.review_folder`.
"""

from __future__ import annotations

import copy
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from pipeline.core.atomic import atomic_write_text
from pipeline.core.ownership import record_files
from pipeline.rebuild.review_folder import (
    BLACKLIST,
    CLASS_LOG,
    CLASS_STATE,
    MARKS,
    NEAR_DUPLICATES,
    REASONS,
    REVIEWED_IMAGES,
    REVIEWED_PAIRS,
    STATE_FILES,
    dumps_state,
    read_state_file,
)

COMMAND = "review"
MAX_NOTE = 2000
MAX_REVIEWER = 100
PAIR_DECISIONS = {"confirm": "near_duplicate", "reject": "distinct", "undo": None}


def now() -> str:
    """The time stamp of a mark: UTC, ISO 8601, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_reviewer(reviewer) -> str:
    """The reviewer's name, stripped; a ValueError when it is missing or too long."""
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ValueError("every mark needs a reviewer name; the page asks for it once")
    reviewer = reviewer.strip()
    if len(reviewer) > MAX_REVIEWER:
        raise ValueError(f"reviewer name is {len(reviewer)} characters; at most {MAX_REVIEWER}")
    return reviewer


class ReviewState:
    """The state files of a review folder, in memory, guarded by one lock."""

    def __init__(self, folder: Path, images_of_class: Mapping[str, Sequence[str]]):
        self.folder = Path(folder)
        self.images_of_class = {w: list(ids) for w, ids in images_of_class.items()}
        self.class_of = {cid: w for w, ids in self.images_of_class.items() for cid in ids}
        self.lock = threading.Lock()
        self.data = {name: read_state_file(self.folder / name) for name in STATE_FILES}
        states = self.data[CLASS_STATE]
        for wnid in self.images_of_class:
            states.setdefault(wnid, {"reviewed": False, "problematic": False})

    def write_all(self) -> None:
        with self.lock:
            self._write(STATE_FILES)

    def _write(self, names: Iterable[str]) -> None:
        names = list(names)
        for name in names:
            atomic_write_text(self.folder / name, dumps_state(name, self.data[name]))
        record_files(self.folder, COMMAND, names)

    def snapshot(self) -> dict:
        """A deep copy of every state file's contents."""
        with self.lock:
            return copy.deepcopy(self.data)

    def class_summary(self) -> dict:
        """Per class: reviewed, problematic, how many images are marked, how many are new (never reviewed)."""
        with self.lock:
            marks, seen, states = self.data[MARKS], self.data[REVIEWED_IMAGES], self.data[CLASS_STATE]
            return {
                wnid: {
                    **states[wnid],
                    "images": len(ids),
                    "marked": sum(1 for c in ids if c in marks and marks[c].get("reason")),
                    "new": sum(1 for c in ids if c not in seen),
                }
                for wnid, ids in self.images_of_class.items()
            }

    def mark(self, candidate_id: str, reason: Optional[str], note: str, reviewer: str) -> Optional[dict]:
        """Set (or with no reason and no note, clear) one image's mark; return the mark."""
        if candidate_id not in self.class_of:
            raise KeyError(f"candidate {candidate_id!r} is not an image of the revision under review")
        if reason is not None and reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r}; the reasons are {', '.join(REASONS)}")
        if not isinstance(note, str) or len(note) > MAX_NOTE:
            raise ValueError(f"a note is a string of at most {MAX_NOTE} characters")
        reviewer = check_reviewer(reviewer)
        note = note.strip()
        with self.lock:
            marks, blacklist = self.data[MARKS], self.data[BLACKLIST]
            if reason is None and not note:
                marks.pop(candidate_id, None)
                blacklist.pop(candidate_id, None)
                mark = None
            else:
                mark = {"reason": reason, "note": note, "wnid": self.class_of[candidate_id], "reviewer": reviewer, "date": now()}
                marks[candidate_id] = mark
                if reason is None:
                    blacklist.pop(candidate_id, None)
                else:
                    blacklist[candidate_id] = REASONS[reason]
            self._write([MARKS, BLACKLIST])
            return copy.deepcopy(mark)

    def set_class(self, wnid: str, reviewer: str, *, reviewed: Optional[bool] = None, problematic: Optional[bool] = None) -> dict:
        """Change a class's ``reviewed`` and/or ``problematic`` flag; marking it reviewed marks its images seen."""
        if wnid not in self.images_of_class:
            raise KeyError(f"class {wnid!r} has no images in the revision under review")
        for name, value in (("reviewed", reviewed), ("problematic", problematic)):
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        reviewer = check_reviewer(reviewer)
        with self.lock:
            state = self.data[CLASS_STATE][wnid]
            stamp = {"reviewer": reviewer, "date": now()}
            names = [CLASS_STATE, CLASS_LOG]
            if reviewed is not None:
                state["reviewed"] = reviewed
                if reviewed:
                    for cid in self.images_of_class[wnid]:
                        self.data[REVIEWED_IMAGES].setdefault(cid, dict(stamp))
                    names.append(REVIEWED_IMAGES)
            if problematic is not None:
                state["problematic"] = problematic
            self.data[CLASS_LOG][wnid] = stamp
            self._write(names)
            return dict(state)

    def review_pair(self, candidate_id: str, reference_id: str, reference_source: str, metric: str, decision: str, reviewer: str) -> dict:
        """Confirm, reject or undo the pair (candidate, reference), shown on ``metric``'s list.

        A confirmed pair goes to ``near_duplicates.json``; confirmed and rejected pairs are both
        reviewed (one line each in ``reviewed_pairs.jsonl``); undo forgets the pair.
        """
        if decision not in PAIR_DECISIONS:
            raise ValueError(f"unknown decision {decision!r}; use one of {', '.join(PAIR_DECISIONS)}")
        reviewer = check_reviewer(reviewer)
        with self.lock:
            confirmed = self.data[NEAR_DUPLICATES]
            references = [r for r in confirmed.get(candidate_id, []) if r != reference_id]
            if decision == "confirm":
                references.append(reference_id)
            if references:
                confirmed[candidate_id] = references
            else:
                confirmed.pop(candidate_id, None)
            rows = [r for r in self.data[REVIEWED_PAIRS] if (r.get("candidate_id"), r.get("reference_id")) != (candidate_id, reference_id)]
            if PAIR_DECISIONS[decision] is not None:
                rows.append({"candidate_id": candidate_id, "metric": metric, "reference_id": reference_id, "reference_source": reference_source,
                             "reviewer": reviewer, "date": now(), "decision": PAIR_DECISIONS[decision]})
            self.data[REVIEWED_PAIRS] = rows
            self._write([NEAR_DUPLICATES, REVIEWED_PAIRS])
            return self._pair_decisions(candidate_id)

    def pair_decisions(self, candidate_id: str) -> dict:
        """Reference id → "confirmed" or "rejected", for the pairs of ``candidate_id`` reviewed so far."""
        with self.lock:
            return self._pair_decisions(candidate_id)

    def _pair_decisions(self, candidate_id: str) -> dict:
        decisions = {}
        for row in self.data[REVIEWED_PAIRS]:  # the last line of a pair wins
            if row.get("candidate_id") == candidate_id:
                decisions[row["reference_id"]] = "confirmed" if row.get("decision") == "near_duplicate" else "rejected"
        for reference in self.data[NEAR_DUPLICATES].get(candidate_id, ()):
            decisions[reference] = "confirmed"
        return dict(sorted(decisions.items()))

    def reviewed_references(self) -> dict:
        """Candidate id → the references of its reviewed pairs (a reviewed pair counts for every measure)."""
        with self.lock:
            out: dict[str, set] = {}
            for row in self.data[REVIEWED_PAIRS]:
                out.setdefault(row.get("candidate_id"), set()).add(row.get("reference_id"))
            return out

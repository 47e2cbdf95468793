"""The data model of annotation tasks: the tasks folder that ``tasks`` writes and ``ingest`` reads.

A tasks folder holds::

    tasks.jsonl        one task a line: task_id, wnid, reason, images (public names, display order)
    key.jsonl          PRIVATE: a header line (how names are made, the generated secret if any),
                       then one line per public name: name, id, role, wnid (the class the image belongs to)
    batch_input.csv    MTurk batch input: task_id, wnid, class_name, gloss, wikipedia_url, image_1_url ...
    task.html          the task page, with MTurk's ${...} placeholders
    upload/            the annotation copies under their public names
    summary.json       tasks per reason, images per class, cost; hits-<sandbox|live>.jsonl after publishing

A public name is an HMAC-SHA256 (first 32 hex digits) of ``"<asked wnid>/<image id>"`` under a
secret, so workers cannot tell controls from candidates nor recover ids, and an original shown for
two classes has two names, each with one role: ``candidate``, ``positive`` (an original of the
asked class) or ``negative`` (an original of a similar class).

This module is shared by ``tasks``, ``mturk``, ``annotate`` and ``ingest`` so that no stage
imports another. :meth:`TaskKey.assignment` turns one batch-results row into the assignment
fields ``ingest`` checks, naming the row when the task or an image name is unknown or tampered.

>>> name = public_name(b"secret", "n01440764", "ILSVRC2012_val_00000001.JPEG")
>>> len(name), name == public_name(b"secret", "n01443537", "ILSVRC2012_val_00000001.JPEG")
(32, False)
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional, Sequence, Union

from pipeline.rebuild.records import RecordError, read_records
from pipeline.rebuild.tables import COUNTED_STATUSES

PathLike = Union[str, "os.PathLike[str]"]

TASKS_FILE = "tasks.jsonl"
KEY_FILE = "key.jsonl"
BATCH_INPUT = "batch_input.csv"
TASK_PAGE = "task.html"
UPLOAD = "upload"
SUMMARY = "summary.json"
IMAGE_SUFFIX = ".jpg"
SECRET_ENV = "TASKS_SECRET"
ROLES = ("candidate", "positive", "negative")
NAME_LENGTH = 32
PUBLIC_NAME = re.compile(r"[0-9a-f]{%d}" % NAME_LENGTH)
ANSWER_FIELD = "selected"
ANSWER_SEPARATOR = "|"
# our field -> the column of a batch-results CSV it is read from, when tasks are given
TASK_RESULTS_COLUMNS = {
    "assignment_id": "AssignmentId",
    "hit_id": "HITId",
    "worker_id": "WorkerId",
    "status": "AssignmentStatus",
    "task_id": "Input.task_id",
    "selected": f"Answer.{ANSWER_FIELD}",
}


class TaskKeyError(RecordError):
    """A tasks folder or a results row does not agree with the key; the message names the row."""


def public_name(secret: bytes, wnid: str, image_id: str) -> str:
    """The name workers see for ``image_id`` in a task about ``wnid`` (32 hex digits)."""
    return hmac.digest(secret, f"{wnid}/{image_id}".encode("utf-8"), "sha256").hex()[:NAME_LENGTH]


def task_id_of(secret: bytes, wnid: str, image_ids: Sequence[str]) -> str:
    """A stable task id: the class and a digest of its images (unique across follow-up rounds)."""
    digest = hmac.new(secret, ("task|" + wnid + "|" + "|".join(image_ids)).encode("utf-8"), hashlib.sha256)
    return f"{wnid}-{digest.hexdigest()[:12]}"


def name_of_answer(value: str) -> str:
    """The public name in an answer value: a bare name, or an image URL ending in ``<name>.jpg``.

    >>> name_of_answer("https://example.org/tasks/" + "ab" * 16 + ".jpg") == "ab" * 16
    True
    """
    return value.rpartition("/")[2].strip().removesuffix(IMAGE_SUFFIX)


@dataclass(frozen=True)
class KeyEntry:
    """What a public name stands for: the image id, its role in the task, and the class it belongs to."""

    name: str
    id: str
    role: str
    wnid: str


@dataclass(frozen=True)
class Task:
    """One grid: the asked class, why it exists, and the public names in display order."""

    task_id: str
    wnid: str
    images: tuple[str, ...]
    reason: str = "initial"

    def record(self) -> dict:
        return {"task_id": self.task_id, "wnid": self.wnid, "reason": self.reason, "images": list(self.images)}


def key_header(secret: bytes, from_env: bool) -> dict:
    """The first line of ``key.jsonl``: the naming scheme, and the secret unless it came from the environment."""
    return {"naming": f"hmac-sha256(secret, '<asked wnid>/<image id>')[:{NAME_LENGTH}]",
            "secret": None if from_env else secret.hex(), "secret_from": SECRET_ENV if from_env else "this file"}


def resolve_secret(environ: Mapping[str, str] = os.environ) -> tuple[bytes, bool]:
    """The naming secret: ``TASKS_SECRET`` when set (and whether it was), else 32 new random bytes."""
    given = environ.get(SECRET_ENV)
    if given is not None:
        if len(given) < 16:
            raise ValueError(f"{SECRET_ENV} is too short ({len(given)} characters); use at least 16 random characters")
        return given.encode("utf-8"), True
    return os.urandom(32), False


@dataclass
class ControlTally:
    """Per worker: controls answered in counted assignments, and how many were answered right."""

    controls: dict = field(default_factory=lambda: defaultdict(int))
    correct: dict = field(default_factory=lambda: defaultdict(int))

    def add(self, worker: str, entries: Iterable[KeyEntry], selected: set) -> None:
        for entry in entries:
            if entry.role != "candidate":
                self.controls[worker] += 1
                self.correct[worker] += (entry.name in selected) == (entry.role == "positive")

    def rows(self) -> list[dict]:
        """One row per worker, sorted by id: ``worker_id``, ``controls``, ``correct``, ``control_accuracy``."""
        return [{"worker_id": w, "controls": n, "correct": self.correct[w], "control_accuracy": self.correct[w] / n}
                for w, n in sorted(self.controls.items())]


@dataclass
class TaskKey:
    """The tasks and the key of one or more tasks folders (follow-up rounds merge)."""

    tasks: dict[str, Task]
    entries: dict[str, KeyEntry]
    tally: ControlTally = field(default_factory=ControlTally)
    _views: dict = field(default_factory=dict, repr=False)
    _answer_names: dict = field(default_factory=dict, repr=False)  # answer value (a URL) -> public name

    @classmethod
    def load(cls, folders: Sequence[PathLike]) -> "TaskKey":
        """Read ``tasks.jsonl`` and ``key.jsonl`` of each folder; a task id or name seen twice must agree."""
        tasks: dict[str, Task] = {}
        entries: dict[str, KeyEntry] = {}
        for folder in folders:
            for entry in read_key(folder):
                if entries.setdefault(entry.name, entry) != entry:
                    raise TaskKeyError(f"{folder}: name {entry.name} stands for two images; these tasks folders do not belong together")
            for task in read_tasks(folder):
                if tasks.setdefault(task.task_id, task) != task:
                    raise TaskKeyError(f"{folder}: task {task.task_id} appears twice with different images")
                missing = [n for n in task.images if n not in entries]
                if missing:
                    raise TaskKeyError(f"{folder}/{TASKS_FILE}: task {task.task_id} shows {missing[0]}, which {KEY_FILE} does not know")
        if not tasks:
            raise TaskKeyError(f"no tasks in {', '.join(map(str, folders))}")
        return cls(tasks, entries)

    def assignment(self, where: str, record: Mapping[str, Optional[str]]) -> dict:
        """The assignment fields of one batch-results row (ids, not names), checked against the key."""
        task_id = record.get(TASK_RESULTS_COLUMNS["task_id"])
        view = self._view(task_id or "")
        if view is None:
            raise TaskKeyError(f"{where}: unknown task {task_id!r}; it is in none of the given tasks folders (pass its folder with --tasks)")
        if view["input_columns"][0] in record:  # the Input.image_<k>_url columns MTurk copies from the batch input
            shown = tuple(record.get(column) for column in view["input_columns"])
            if shown != view["verified_inputs"]:
                self._check_inputs(where, view, shown)
        selected = self._selected_names(where, view, record.get(TASK_RESULTS_COLUMNS["selected"]))
        fields = {ours: record.get(theirs) for ours, theirs in TASK_RESULTS_COLUMNS.items()}
        if fields["status"] in COUNTED_STATUSES and fields["worker_id"]:
            self.tally.add(fields["worker_id"], view["controls"], selected)
        fields.update(wnid=view["task"].wnid, images=view["ids"], selected=[view["id_of"][n] for n in selected])
        return fields

    def _view(self, task_id: str) -> Optional[dict]:
        """What checking a row of ``task_id`` needs, computed once per task."""
        if task_id not in self._views:
            task = self.tasks.get(task_id)
            if task is None:
                return None
            entries = [self.entries[n] for n in task.images]
            self._views[task_id] = {"task": task, "ids": [e.id for e in entries], "id_of": {e.name: e.id for e in entries},
                                    "controls": [e for e in entries if e.role != "candidate"], "verified_inputs": None,
                                    "input_columns": [f"Input.image_{k}_url" for k in range(1, len(entries) + 1)]}
        return self._views[task_id]

    @staticmethod
    def _check_inputs(where: str, view: dict, shown: tuple) -> None:
        task = view["task"]
        for position, (name, value) in enumerate(zip(task.images, shown), start=1):
            if value is not None and name_of_answer(value) != name:
                raise TaskKeyError(f"{where}: image {position} of task {task.task_id} is {value!r}, not the task's image {name} (tampered row?)")
        view["verified_inputs"] = shown

    def assignments(self, path: PathLike) -> Iterator[tuple[str, dict]]:
        """``(where, assignment fields)`` for each row of a batch-results CSV of these tasks."""
        path = Path(path)
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), None) or []
        missing = [column for column in TASK_RESULTS_COLUMNS.values() if column not in header]
        if path.suffix.lower() != ".csv" or missing:
            raise TaskKeyError(f"{path.name}: results of tasks must be a batch-results CSV with the columns "
                               f"{', '.join(TASK_RESULTS_COLUMNS.values())}" + (f" (missing {', '.join(missing)})" if missing else ""))
        for where, record in read_records(path):
            yield where, self.assignment(where, record)

    def _selected_names(self, where: str, view: dict, answer: Optional[str]) -> set:
        cache = self._answer_names
        names = set()
        for value in answer.split(ANSWER_SEPARATOR) if answer else ():
            if value:
                names.add(cache[value] if value in cache else cache.setdefault(value, name_of_answer(value)))
        for name in names.difference(view["id_of"]):
            if name not in self.entries:
                raise TaskKeyError(f"{where}: selected image {name!r} is not a name of any task (unknown or tampered name)")
            raise TaskKeyError(f"{where}: selected image {name} is not one of the images of task {view['task'].task_id} (tampered row?)")
        return names


def write_tasks_and_key(folder: Path, tasks: Sequence[Task], entries: Iterable[KeyEntry], header: dict) -> None:
    """Write ``tasks.jsonl`` and ``key.jsonl`` into ``folder`` (a temporary folder of the stage)."""
    with open(folder / TASKS_FILE, "w", encoding="utf-8") as f:
        for task in tasks:
            f.write(json.dumps(task.record()) + "\n")
    with open(folder / KEY_FILE, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for entry in sorted(entries, key=lambda e: e.name):
            f.write(json.dumps({"name": entry.name, "id": entry.id, "role": entry.role, "wnid": entry.wnid}) + "\n")
    os.chmod(folder / KEY_FILE, 0o600)  # private: it undoes the obfuscation


def _jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; is {path.parent} a folder written by `python -m pipeline tasks`?")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as e:
                    raise TaskKeyError(f"{path.name} line {number}: not valid JSON ({e.msg})") from None


def read_key(folder: PathLike) -> list[KeyEntry]:
    """The entries of ``folder/key.jsonl`` (the header line skipped)."""
    entries = []
    for number, record in _jsonl(Path(folder) / KEY_FILE):
        if "naming" in record:
            continue
        try:
            entry = KeyEntry(record["name"], record["id"], record["role"], record["wnid"])
        except (KeyError, TypeError):
            raise TaskKeyError(f"{KEY_FILE} line {number}: expected name, id, role and wnid") from None
        if entry.role not in ROLES or not PUBLIC_NAME.fullmatch(entry.name):
            raise TaskKeyError(f"{KEY_FILE} line {number}: bad name {entry.name!r} or role {entry.role!r} (roles: {', '.join(ROLES)})")
        entries.append(entry)
    return entries


def read_key_header(folder: PathLike) -> dict:
    """The first line of ``folder/key.jsonl``."""
    for _number, record in _jsonl(Path(folder) / KEY_FILE):
        return record
    raise TaskKeyError(f"{folder}/{KEY_FILE} is empty")


def read_tasks(folder: PathLike) -> list[Task]:
    """The tasks of ``folder/tasks.jsonl``, in file order."""
    tasks = []
    for number, record in _jsonl(Path(folder) / TASKS_FILE):
        try:
            tasks.append(Task(record["task_id"], record["wnid"], tuple(record["images"]), record.get("reason", "initial")))
        except (KeyError, TypeError):
            raise TaskKeyError(f"{TASKS_FILE} line {number}: expected task_id, wnid and images") from None
    return tasks

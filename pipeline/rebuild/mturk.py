"""MTurk through its API: one HIT per task (``publish``), their assignments as a batch-results CSV (``collect``).

``publish`` creates each HIT with boto3's ``mturk`` client: an ``HTMLQuestion`` holding the task
page filled with the task's row, the original's settings as defaults (:class:`HitSettings`:
reward 0.10 USD, 10 assignments, 600 s per assignment, 7 days lifetime, 3 days until
auto-approval), the sandbox unless ``live``. Each HIT id is appended (and synced) to
``hits-<sandbox|live>.jsonl`` in the tasks folder as soon as MTurk answers, and every create
carries a ``UniqueRequestToken`` and the task id as ``RequesterAnnotation``: a re-run skips
recorded tasks and adopts HITs created by a run interrupted before it could record them, so no
HIT is created twice.

``collect`` pages through the assignments of every recorded HIT and writes them in the shape of
MTurk's batch results (:mod:`pipeline.rebuild.batch_results`), merged with what an earlier
collect wrote, so an assignment MTurk no longer lists is never lost. Throttling errors are
retried by botocore's standard retry mode. Credentials come the usual AWS way and are never printed.
"""

from __future__ import annotations

import json
import logging
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Union

from pipeline.core.ownership import check_output_file, owned_file
from pipeline.rebuild.batch_results import read_batch_input, read_results, results_row, write_results
from pipeline.rebuild.task_key import SUMMARY, TASK_PAGE, TaskKey
from pipeline.rebuild.task_page import fill_page

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
COMMAND = "mturk"
ENDPOINTS = {"sandbox": "https://mturk-requester-sandbox.us-east-1.amazonaws.com", "live": "https://mturk-requester.us-east-1.amazonaws.com"}
ANNOTATION_PREFIX = "imagenetv2-hf task "
STATUSES = ("Submitted", "Approved", "Rejected")
HTML_QUESTION = ('<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd">'
                 "<HTMLContent><![CDATA[{html}]]></HTMLContent><FrameHeight>0</FrameHeight></HTMLQuestion>")


@dataclass(frozen=True)
class HitSettings:
    """The HIT settings; ``None`` reward or assignments: those the tasks were made with (summary.json)."""

    reward: Optional[float] = None
    assignments: Optional[int] = None
    assignment_duration_s: int = 600
    lifetime_s: int = 7 * 24 * 3600
    auto_approval_s: int = 3 * 24 * 3600
    title: str = "Select every image that contains a {class_name}"
    description: str = "Click each photo in a grid that shows the named object, then submit."
    keywords: str = "image, photo, labeling, classification"

    def __post_init__(self):
        for name in ("assignment_duration_s", "lifetime_s", "auto_approval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {getattr(self, name)!r}")


def environment(live: bool) -> str:
    return "live" if live else "sandbox"


def hits_path(folder: PathLike, live: bool) -> Path:
    """Where the HIT ids of a tasks folder are recorded, per environment."""
    return Path(folder) / f"hits-{environment(live)}.jsonl"


def mturk_client(live: bool = False, endpoint_url: Optional[str] = None):
    """boto3's ``mturk`` client for the sandbox (default) or the live site, retrying throttling errors."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 8}, connect_timeout=10, read_timeout=60)
    return boto3.client("mturk", region_name="us-east-1", endpoint_url=endpoint_url or ENDPOINTS[environment(live)], config=config)


def read_hits(path: Path) -> dict[str, dict]:
    """Task id → the recorded HIT (``hit_id``, ``hit_type_id``, ``created``)."""
    hits = {}
    if path.is_file():
        for line in path.read_text("utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                hits[record["task_id"]] = record
    return hits


def _record_hit(path: Path, task_id: str, hit: dict) -> dict:
    record = {"task_id": task_id, "hit_id": hit["HITId"], "hit_type_id": hit.get("HITTypeId"),
              "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return record


def _existing_hits(client, wanted: set) -> dict[str, dict]:
    """HITs on MTurk whose annotation names one of the ``wanted`` task ids (created but not recorded)."""
    found, token = {}, None
    while True:
        page = client.list_hits(MaxResults=100, **({"NextToken": token} if token else {}))
        for hit in page.get("HITs", []):
            task_id = (hit.get("RequesterAnnotation") or "").removeprefix(ANNOTATION_PREFIX)
            if task_id in wanted and (hit.get("RequesterAnnotation") or "").startswith(ANNOTATION_PREFIX):
                found.setdefault(task_id, hit)
        token = page.get("NextToken")
        if not token or not page.get("HITs"):
            return found


def _hit_request(task_id: str, row: dict, page: str, settings: HitSettings, defaults: dict, env: str) -> dict:
    html = fill_page(page, row)
    if "]]>" in html:
        raise ValueError(f"task {task_id}: the page contains ']]>', which cannot go into an HTMLQuestion")
    reward = settings.reward if settings.reward is not None else defaults["reward"]
    return {
        "MaxAssignments": settings.assignments or defaults["assignments"], "Reward": f"{reward:.2f}",
        "AssignmentDurationInSeconds": settings.assignment_duration_s, "LifetimeInSeconds": settings.lifetime_s,
        "AutoApprovalDelayInSeconds": settings.auto_approval_s, "Title": settings.title.format(class_name=row["class_name"]),
        "Description": settings.description, "Keywords": settings.keywords, "Question": HTML_QUESTION.format(html=html),
        "RequesterAnnotation": ANNOTATION_PREFIX + task_id, "UniqueRequestToken": f"{env}-{task_id}"[:64],
    }


def _check_urls(rows: list[dict]) -> None:
    for row in rows:
        for column, url in row.items():
            if column.startswith("image_") and url and not url.startswith(("https://", "http://")):
                raise ValueError(f"task {row['task_id']}: image URL {url!r} is relative; workers cannot load it. "
                                 "Make the tasks with --image-base-url https://... (or s3://bucket/prefix)")


def publish(folder: PathLike, *, live: bool = False, settings: HitSettings = HitSettings(), client=None,
            endpoint_url: Optional[str] = None, progress=lambda it: it) -> dict:
    """Create one HIT per task not yet published; return counts (``created``, ``adopted``, ``already``)."""
    from botocore.exceptions import ClientError

    folder = Path(folder)
    key = TaskKey.load([folder])
    rows = {row["task_id"]: row for row in read_batch_input(folder)}
    _check_urls(list(rows.values()))
    defaults = json.loads((folder / SUMMARY).read_text("utf-8"))["config"]
    page = (folder / TASK_PAGE).read_text("utf-8")
    client = client or mturk_client(live, endpoint_url)
    path = hits_path(folder, live)
    recorded = read_hits(path)
    todo = [t for t in key.tasks if t not in recorded]
    adopted = _existing_hits(client, set(todo)) if todo else {}
    for task_id, hit in adopted.items():
        _record_hit(path, task_id, hit)
    created = 0
    for task_id in progress([t for t in todo if t not in adopted]):
        request = _hit_request(task_id, rows[task_id], page, settings, defaults, environment(live))
        try:
            hit = client.create_hit(**request)["HIT"]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "RequestError" or "UniqueRequestToken" not in str(e):
                raise
            hit = _existing_hits(client, {task_id}).get(task_id)  # created by an attempt whose answer was lost
            if hit is None:
                raise
            adopted[task_id] = hit
        else:
            created += 1
        _record_hit(path, task_id, hit)
    logger.info("%s: %d HITs created, %d adopted, %d already published", environment(live), created, len(adopted), len(recorded))
    return {"environment": environment(live), "tasks": len(key.tasks), "created": created, "adopted": len(adopted), "already": len(recorded)}


def answer_fields(xml: str) -> dict[str, str]:
    """The fields of an MTurk ``QuestionFormAnswers`` document (question identifier → free text).

    >>> answer_fields('<QuestionFormAnswers xmlns="x"><Answer><QuestionIdentifier>selected</QuestionIdentifier>'
    ...               '<FreeText>a|b</FreeText></Answer></QuestionFormAnswers>')
    {'selected': 'a|b'}
    """
    fields = {}
    for answer in ET.fromstring(xml):
        parts = {child.tag.rsplit("}", 1)[-1]: child.text or "" for child in answer}
        if "QuestionIdentifier" in parts:
            name = parts["QuestionIdentifier"]
            value = parts.get("FreeText", "")
            fields[name] = f"{fields[name]}|{value}" if fields.get(name) and value else (fields.get(name) or value)
    return fields


def _time(value) -> str:
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromtimestamp(float(value), timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


def _assignment_row(assignment: dict, hit: dict, batch_row: dict) -> dict:
    answers = answer_fields(assignment.get("Answer") or "<QuestionFormAnswers/>")
    accept, submit = assignment.get("AcceptTime"), assignment.get("SubmitTime")
    seconds = ""
    if accept is not None and submit is not None:
        to_s = lambda v: v.timestamp() if isinstance(v, datetime) else float(v)  # noqa: E731
        seconds = int(to_s(submit) - to_s(accept))
    fields = {"HITId": hit["hit_id"], "HITTypeId": hit.get("hit_type_id"), "AssignmentId": assignment["AssignmentId"],
              "WorkerId": assignment["WorkerId"], "AssignmentStatus": assignment["AssignmentStatus"],
              "AcceptTime": _time(accept), "SubmitTime": _time(submit), "WorkTimeInSeconds": seconds}
    selected = [v for v in answers.get("selected", "").split("|") if v]
    return results_row(fields, batch_row, selected)


def collect(folder: PathLike, output: PathLike, *, live: bool = False, client=None, endpoint_url: Optional[str] = None,
            progress=lambda it: it) -> dict:
    """Write every assignment of the published HITs to ``output`` (merged with an earlier collect); return counts."""
    folder = Path(folder)
    output = check_output_file(output, COMMAND, inputs=[folder])
    hits = read_hits(hits_path(folder, live))
    if not hits:
        raise ValueError(f"no HITs recorded in {hits_path(folder, live)}; run `python -m pipeline mturk publish {folder}` first"
                         + ("" if live else " (or pass --live for the live site)"))
    batch = read_batch_input(folder)
    rows_by_task = {row["task_id"]: row for row in batch}
    client = client or mturk_client(live, endpoint_url)
    rows = {row["AssignmentId"]: row for row in read_results(output)}
    kept_before = len(rows)
    seen = 0
    for task_id, hit in progress(list(hits.items())):
        token = None
        while True:
            page = client.list_assignments_for_hit(HITId=hit["hit_id"], MaxResults=100, AssignmentStatuses=list(STATUSES),
                                                   **({"NextToken": token} if token else {}))
            for assignment in page.get("Assignments", []):
                rows[assignment["AssignmentId"]] = _assignment_row(assignment, hit, rows_by_task[task_id])
                seen += 1
            token = page.get("NextToken")
            if not token or not page.get("Assignments"):
                break
    with owned_file(output, COMMAND, "w", inputs=[folder]) as f:
        write_results(f, sorted(rows.values(), key=lambda r: (r["HITId"], r["AssignmentId"])), list(batch[0]))
    statuses = {s: sum(1 for r in rows.values() if r["AssignmentStatus"] == s) for s in STATUSES}
    return {"environment": environment(live), "hits": len(hits), "listed": seen, "assignments": len(rows),
            "kept_from_before": kept_before, **statuses}

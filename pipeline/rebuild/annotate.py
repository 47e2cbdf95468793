"""Annotate: the task page for lab annotators on the local network, answers in the batch-results CSV shape.

The annotator gives a name, then gets one task after another: the same page MTurk workers see
(:mod:`pipeline.rebuild.task_page`), whose form posts to this server's ``/mturk/externalSubmit``
as it would to MTurk's. Each task is offered until it has its ``assignments`` answers, never twice
to the same annotator. Every answer rewrites the results file atomically (one row per
assignment, MTurk's columns, status ``Submitted``), so ``ingest --tasks`` reads it like a batch
downloaded from MTurk, and a restarted server continues where it stopped.

The server is a Starlette app run by :func:`pipeline.rebuild.local_server.serve` (localhost
unless ``host`` is given, then a token; quiet; a clear message when the port is taken).
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Union
from urllib.parse import parse_qs, quote

from pipeline.core.ownership import check_output_file, owned_file
from pipeline.rebuild.batch_results import read_batch_input, read_results, results_row, write_results
from pipeline.rebuild.task_key import IMAGE_SUFFIX, PUBLIC_NAME, SUMMARY, TASK_PAGE, UPLOAD, TaskKey
from pipeline.rebuild.task_page import fill_page, template

PathLike = Union[str, "os.PathLike[str]"]
COMMAND = "annotate"
ANNOTATOR_NAME = re.compile(r"[^\x00-\x1f\x7f|,]{1,64}")


def default_output(tasks_folder: PathLike) -> Path:
    """Where answers go by default: ``<TASKS>-local-results.csv`` beside the tasks folder."""
    folder = Path(tasks_folder)
    return folder.with_name(folder.name + "-local-results.csv")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


class AnnotationSession:
    """The state of a local annotation round: tasks, answers so far, assignments handed out."""

    def __init__(self, tasks_folder: PathLike, output: PathLike):
        self.folder = Path(tasks_folder)
        self.key = TaskKey.load([self.folder])
        self.batch = {row["task_id"]: row for row in read_batch_input(self.folder)}
        self.columns = list(next(iter(self.batch.values())))
        self.assignments = json.loads((self.folder / SUMMARY).read_text("utf-8"))["config"]["assignments"]
        self.page = (self.folder / TASK_PAGE).read_text("utf-8")
        self.output = check_output_file(output, COMMAND, inputs=[self.folder])
        self.rows = read_results(self.output)
        unknown = [r.get("Input.task_id") for r in self.rows if r.get("Input.task_id") not in self.batch]
        if unknown:
            raise ValueError(f"{self.output} holds answers to task {unknown[0]!r}, which is not in {self.folder}; pass another --output")
        self.pending: dict[str, tuple[str, str, str]] = {}  # assignment id -> (task, annotator, accept time)

    def done_by(self, annotator: str) -> set:
        return {r["Input.task_id"] for r in self.rows if r["WorkerId"] == annotator}

    def next_task(self, annotator: str) -> Optional[str]:
        """The first task the annotator has not done that still needs answers."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["Input.task_id"]] = counts.get(row["Input.task_id"], 0) + 1
        done = self.done_by(annotator)
        return next((t for t in self.batch if t not in done and counts.get(t, 0) < self.assignments), None)

    def hand_out(self, task_id: str, annotator: str) -> str:
        assignment = "LOCAL" + secrets.token_hex(12).upper()
        self.pending[assignment] = (task_id, annotator, _now())
        return assignment

    def task_html(self, task_id: str, prefix: str) -> str:
        """The task page filled with the task's row, its images served by this server."""
        row = dict(self.batch[task_id])
        for name_number, name in enumerate(self.key.tasks[task_id].images, start=1):
            row[f"image_{name_number}_url"] = f"{prefix}/{UPLOAD}/{name}{IMAGE_SUFFIX}"
        return fill_page(self.page, row, strict=False)

    def submit(self, assignment: str, selected: list[str]) -> str:
        """Record one answer (rewriting the results file atomically); return the annotator."""
        if assignment not in self.pending:
            raise KeyError(assignment)
        task_id, annotator, accepted = self.pending.pop(assignment)
        if task_id in self.done_by(annotator):
            return annotator  # a second submit of the same task (back button): the first answer stands
        fields = {"HITId": task_id, "HITTypeId": "local", "AssignmentId": assignment, "WorkerId": annotator,
                  "AssignmentStatus": "Submitted", "AcceptTime": accepted, "SubmitTime": _now()}
        self.rows.append(results_row(fields, self.batch[task_id], selected))
        with owned_file(self.output, COMMAND, "w", inputs=[self.folder]) as f:
            write_results(f, self.rows, self.columns)
        return annotator


async def _form(request) -> dict[str, list[str]]:
    """The fields of a posted form (``application/x-www-form-urlencoded``, what the pages send)."""
    return parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)


def _page(message: str, annotator: str = "") -> str:
    text = template("annotator.html")
    return text.replace("{message}", message).replace("{annotator}", html.escape(annotator, quote=True))


def annotation_app(session: AnnotationSession):
    """The Starlette app of the annotation page (wrap it in the token middleware to serve it)."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse
    from starlette.routing import Route

    def next_url(annotator: str) -> str:
        return f"next?annotator={quote(annotator)}"

    async def home(request):
        return HTMLResponse(_page("Type your name to start; the same name later continues where you stopped."))

    async def start(request):
        annotator = ((await _form(request)).get("annotator") or [""])[0].strip()
        if not ANNOTATOR_NAME.fullmatch(annotator):
            return HTMLResponse(_page("Please type a name of 1 to 64 characters (no | or ,)."), status_code=400)
        return RedirectResponse(next_url(annotator), status_code=303)

    async def next_task(request):
        annotator = request.query_params.get("annotator", "")
        if not ANNOTATOR_NAME.fullmatch(annotator):
            return RedirectResponse(".", status_code=303)
        task_id = session.next_task(annotator)
        if task_id is None:
            return HTMLResponse(_page(f"Thank you, {html.escape(annotator)}: there are no more tasks for you.", annotator))
        assignment = session.hand_out(task_id, annotator)
        return RedirectResponse(f"task/{quote(task_id)}?assignmentId={assignment}&workerId={quote(annotator)}&turkSubmitTo=", status_code=303)

    async def task(request):
        task_id = request.path_params["task_id"]
        if task_id not in session.batch:
            return PlainTextResponse(f"no task {task_id}", status_code=404)
        return HTMLResponse(session.task_html(task_id, ""))

    async def image(request):
        name = request.path_params["name"]
        path = session.folder / UPLOAD / name
        if not (name.endswith(IMAGE_SUFFIX) and PUBLIC_NAME.fullmatch(name[: -len(IMAGE_SUFFIX)]) and path.is_file()):
            return PlainTextResponse("no such image", status_code=404)
        return FileResponse(path, media_type="image/jpeg")

    async def submit(request):
        form = await _form(request)
        try:
            annotator = session.submit((form.get("assignmentId") or [""])[0], form.get("selected", []))
        except KeyError:
            return PlainTextResponse("unknown or already submitted assignment; go back to the start page", status_code=400)
        return RedirectResponse("/" + next_url(annotator), status_code=303)

    return Starlette(routes=[
        Route("/", home), Route("/start", start, methods=["POST"]), Route("/next", next_task),
        Route("/task/{task_id}", task), Route(f"/{UPLOAD}/{{name}}", image), Route("/mturk/externalSubmit", submit, methods=["POST"]),
    ])


def run_annotation_server(tasks_folder: PathLike, *, output: Optional[PathLike] = None, host: str = "127.0.0.1",
                          port: int = 8000, token: Optional[str] = None) -> None:
    """Serve the annotation page until Ctrl-C (see :func:`pipeline.rebuild.local_server.serve`)."""
    from pipeline.rebuild.local_server import access_token, check_port, serve

    session = AnnotationSession(tasks_folder, output or default_output(tasks_folder))
    if not (session.folder / UPLOAD).is_dir():
        raise ValueError(f"{session.folder} has no {UPLOAD}/ folder (made with --no-upload?); make the tasks with their images")
    check_port(host, port)
    serve(annotation_app(session), host, port, token=access_token(host, token), name=f"annotation page (answers to {session.output})")

"""A fake of MTurk's requester API (JSON 1.1 protocol) over loopback, for boto3 with ``endpoint_url``.

It keeps HITs and assignments in memory and implements what ``mturk publish`` and ``mturk
collect`` call: CreateHIT (with ``UniqueRequestToken``: a second create with the same token is a
``RequestError``, as on MTurk), ListHITs and ListAssignmentsForHIT (paged: at most ``page_size``
per page, whatever ``MaxResults`` asks). Faults: ``throttle[op] = n`` answers the next n calls of
``op`` with a ``ThrottlingException``; ``drop_after_create = {k}`` creates the k-th HIT and then
closes the connection without an answer (a run interrupted after MTurk acted). Workers are
played by :meth:`FakeMTurk.submit`.

It also answers S3's PutObject (``PUT /bucket/key``), for ``tasks --image-base-url s3://...``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

TARGET_PREFIX = "MTurkRequesterServiceV20170117."


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):  # S3 PutObject, path style
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.fake.objects[self.path.split("?")[0]] = (data, self.headers.get("Content-Type"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.send_header("ETag", '"fake"')
        self.end_headers()

    def do_POST(self):
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        op = self.headers.get("X-Amz-Target", "").removeprefix(TARGET_PREFIX)
        with fake.lock:
            fake.requests.append((op, body))
            if fake.throttle.get(op, 0) > 0:
                fake.throttle[op] -= 1
                return self._reply(400, {"__type": "ThrottlingException", "message": "Rate exceeded"})
            handler = getattr(fake, f"op_{op}", None)
            if handler is None:
                return self._reply(400, {"__type": "RequestError", "Message": f"the fake does not know {op}"})
            status, payload = handler(body)
            if op == "CreateHIT" and status == 200 and len(fake.hits) in fake.drop_after_create:
                fake.drop_after_create.discard(len(fake.hits))
                self.close_connection = True
                self.connection.shutdown(2)
                return None
        return self._reply(status, payload)


class FakeMTurk:
    """The fake service; ``endpoint_url`` is where boto3 should talk to it."""

    def __init__(self, page_size: int = 2):
        self.page_size = page_size
        self.lock = threading.Lock()
        self.hits: dict[str, dict] = {}
        self.tokens: dict[str, str] = {}
        self.assignments: dict[str, list] = {}
        self.requests: list = []
        self.throttle: dict[str, int] = {}
        self.drop_after_create: set = set()
        self.objects: dict = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def calls(self, op: str) -> list:
        return [body for name, body in self.requests if name == op]

    # --- operations ---

    def op_CreateHIT(self, body):
        token = body.get("UniqueRequestToken")
        if token in self.tokens:
            return 400, {"__type": "RequestError", "Message": f"The HIT with UniqueRequestToken {token} already exists: {self.tokens[token]}"}
        hit_id = f"HIT{len(self.hits) + 1:05d}FAKE"
        hit = {"HITId": hit_id, "HITTypeId": "TYPEFAKE", "CreationTime": time.time(), "HITStatus": "Assignable",
               **{k: body.get(k) for k in ("Title", "Description", "Keywords", "Reward", "MaxAssignments", "Question",
                                            "RequesterAnnotation", "LifetimeInSeconds", "AssignmentDurationInSeconds",
                                            "AutoApprovalDelayInSeconds")}}
        self.hits[hit_id] = hit
        self.assignments[hit_id] = []
        if token:
            self.tokens[token] = hit_id
        return 200, {"HIT": {k: v for k, v in hit.items() if k not in ("LifetimeInSeconds",)}}

    def _page(self, items: list, body: dict) -> tuple[list, dict]:
        start = int(body.get("NextToken") or 0)
        size = min(self.page_size, int(body.get("MaxResults") or 10))
        page = items[start : start + size]
        more = {"NextToken": str(start + size)} if start + size < len(items) else {}
        return page, more

    def op_ListHITs(self, body):
        hits = [{k: v for k, v in h.items() if k != "LifetimeInSeconds"} for h in self.hits.values()]
        page, more = self._page(hits, body)
        return 200, {"HITs": page, "NumResults": len(page), **more}

    def op_ListAssignmentsForHIT(self, body):
        if body.get("HITId") not in self.hits:
            return 400, {"__type": "RequestError", "Message": f"no HIT {body.get('HITId')}"}
        wanted = body.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"]
        items = [a for a in self.assignments[body["HITId"]] if a["AssignmentStatus"] in wanted]
        page, more = self._page(items, body)
        return 200, {"Assignments": page, "NumResults": len(page), **more}

    # --- the workers ---

    def submit(self, hit_id: str, worker: str, selected: list, status: str = "Submitted") -> str:
        """A worker's answer to a HIT, as MTurk stores it (the multi-select field joined by ``|``)."""
        with self.lock:
            number = sum(len(a) for a in self.assignments.values()) + 1
            answer = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><QuestionFormAnswers xmlns=\"http://mechanicalturk.amazonaws.com/"
                      "AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd\">"
                      f"<Answer><QuestionIdentifier>selected</QuestionIdentifier><FreeText>{escape('|'.join(selected))}</FreeText></Answer>"
                      f"<Answer><QuestionIdentifier>task</QuestionIdentifier><FreeText>x</FreeText></Answer></QuestionFormAnswers>")
            assignment = {"AssignmentId": f"ASG{number:06d}FAKE", "WorkerId": worker, "HITId": hit_id, "AssignmentStatus": status,
                          "AcceptTime": time.time() - 60, "SubmitTime": time.time(), "Answer": answer}
            self.assignments[hit_id].append(assignment)
            return assignment["AssignmentId"]

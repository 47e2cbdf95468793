"""The review app: a Starlette app over a :class:`~pipeline.rebuild.review.session.Session`.

Pages (static files, no build step): ``/class`` (the class page) and ``/near-duplicates``.
JSON API, one small update per click::

    GET  /api/session                 the revision, the reasons, the classes with their review summary
    GET  /api/class/{wnid}            a class's images (marks, metadata, new or seen) and its originals
    POST /api/mark                    {candidate_id, reason|null, note, reviewer}
    POST /api/class-state             {wnid, reviewed?, problematic?, reviewer}
    GET  /api/near-duplicates         the candidates to review, with their status per measure
    GET  /api/near-duplicates/{id}    one candidate's neighbours per measure, with the decisions so far
    POST /api/pair                    {candidate_id, reference_id, metric, decision: confirm|reject|undo, reviewer}
    GET  /image/{kind}/{id}           an image by id: kind is candidate, original or reference

Images are looked up by id in the session's :class:`~pipeline.rebuild.review.images.ImageStore`;
no request names a path. Run it with :func:`pipeline.rebuild.local_server.serve`, which adds
the access token when the server listens beyond localhost.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pipeline.rebuild.review.images import media_type
from pipeline.rebuild.review.session import Session
from pipeline.rebuild.review_folder import REASONS

STATIC = Path(str(resources.files("pipeline.rebuild.review").joinpath("static")))
NEIGHBOURS_SHOWN = 8  # per measure, besides every neighbour under the threshold
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _body(request: Request) -> dict:
    try:
        data = await request.json()
    except ValueError:
        raise ValueError("the request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ValueError("the request body must be a JSON object")
    return data


def _page(name: str):
    def endpoint(request: Request) -> Response:
        return FileResponse(STATIC / name, media_type="text/html", headers=SECURITY_HEADERS)

    return endpoint


class ReviewApp:
    """The endpoints, bound to one session."""

    def __init__(self, session: Session):
        self.session = session

    def session_info(self, request: Request) -> JSONResponse:
        s = self.session
        summary = s.state.class_summary()
        classes = [{"wnid": w, "name": s.classes.name(w) if w in s.classes else w, "index": i, **summary[w]} for i, w in enumerate(s.wnids)]
        return JSONResponse({
            **s.info,
            "reasons": [{"key": k, "label": v} for k, v in REASONS.items()],
            "classes": classes,
            "near_duplicates": s.neighbours is not None,
        })

    def class_page(self, request: Request) -> JSONResponse:
        s, wnid = self.session, request.path_params["wnid"]
        if wnid not in s.images_of_class:
            return _error(404, f"class {wnid} has no images in the revision under review")
        data = s.state.snapshot()
        marks, seen = data["marks.json"], data["reviewed_images.json"]
        images = [{"id": cid, "mark": marks.get(cid), "new": cid not in seen, "metadata": s.metadata.get(cid, {})} for cid in s.images_of_class[wnid]]
        originals = [{"id": o, "available": s.store.has("original", o)} for o in s.originals_of_class.get(wnid, [])]
        info = s.classes.info(wnid) if wnid in s.classes else None
        return JSONResponse({
            "wnid": wnid, "name": info.name if info else wnid, "gloss": info.gloss if info else "",
            "index": s.wnids.index(wnid), "images": images, "originals": originals,
            "state": data["class_state.json"][wnid], "log": data["class_log.json"].get(wnid),
        })

    async def mark(self, request: Request) -> JSONResponse:
        body = await _body(request)
        mark = await run_in_threadpool(self.session.state.mark, str(body.get("candidate_id")), body.get("reason"), body.get("note") or "", body.get("reviewer"))
        return JSONResponse({"candidate_id": body.get("candidate_id"), "mark": mark})

    async def class_state(self, request: Request) -> JSONResponse:
        body = await _body(request)
        state = await run_in_threadpool(
            self.session.state.set_class, str(body.get("wnid")), body.get("reviewer"), reviewed=body.get("reviewed"), problematic=body.get("problematic")
        )
        return JSONResponse({"wnid": body.get("wnid"), "state": state})

    def _neighbours(self):
        if self.session.neighbours is None:
            raise LookupError("no near-duplicate search was given; start the review with --near-duplicates DIR")
        return self.session.neighbours

    def near_duplicate_list(self, request: Request) -> JSONResponse:
        nd = self._neighbours()
        reviewed = self.session.state.reviewed_references()
        in_revision = self.session.state.class_of
        rows = []
        for cid in nd.order:
            status = nd.status(cid, reviewed.get(cid, set()))
            rows.append({"candidate_id": cid, "in_revision": cid in in_revision, "status": status,
                         "sufficient": all(m["sufficient"] for m in status.values())})
        return JSONResponse({"thresholds": nd.thresholds, "candidates": rows})

    def near_duplicate_detail(self, request: Request) -> JSONResponse:
        nd, cid = self._neighbours(), request.path_params["candidate_id"]
        if cid not in nd.by_candidate:
            return _error(404, f"candidate {cid} has no neighbours in the near-duplicate search")
        decisions = self.session.state.pair_decisions(cid)
        reviewed = self.session.state.reviewed_references().get(cid, set())
        metrics = {}
        for metric, neighbours in nd.by_candidate[cid].items():
            threshold = nd.thresholds.get(metric)
            below = [n for n in neighbours if threshold is not None and n.distance <= threshold]
            shown = neighbours[: max(len(below), NEIGHBOURS_SHOWN)]
            metrics[metric] = {"threshold": threshold, "neighbours": [
                {"reference_id": n.reference_id, "source": n.reference_source, "rank": n.rank, "distance": n.distance,
                 "below_threshold": threshold is not None and n.distance <= threshold, "decision": decisions.get(n.reference_id),
                 "available": self.session.store.has("reference", n.reference_id)} for n in shown]}
        wnid = self.session.metadata.get(cid, {}).get("wnid")
        name = self.session.classes.name(wnid) if wnid in self.session.classes else wnid
        return JSONResponse({"candidate_id": cid, "wnid": wnid, "class_name": name, "metrics": metrics,
                             "metadata": self.session.metadata.get(cid, {}), "status": nd.status(cid, reviewed)})

    async def pair(self, request: Request) -> JSONResponse:
        nd, body = self._neighbours(), await _body(request)
        cid, ref = str(body.get("candidate_id")), str(body.get("reference_id"))
        neighbour = nd.neighbour(cid, ref, str(body.get("metric")))
        if neighbour is None:
            return _error(404, f"{ref} is not a neighbour of {cid} in the near-duplicate search")
        decisions = await run_in_threadpool(
            self.session.state.review_pair, cid, ref, neighbour.reference_source, neighbour.metric, body.get("decision"), body.get("reviewer")
        )
        return JSONResponse({"candidate_id": cid, "decisions": decisions})

    def image(self, request: Request) -> Response:
        kind, image_id = request.path_params["kind"], request.path_params["image_id"]
        data = self.session.store.read(kind, image_id)
        if data is None:
            return _error(404, f"no {kind} image with id {image_id!r}")
        return Response(data, media_type=media_type(data), headers={"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff"})


def _guarded(endpoint):
    """Bad input → 400, an unknown id → 404, a missing near-duplicate search → 404, each with a sentence."""
    import functools
    import inspect

    async def call(request: Request):
        try:
            if inspect.iscoroutinefunction(endpoint):
                return await endpoint(request)
            return await run_in_threadpool(endpoint, request)
        except KeyError as e:
            return _error(404, str(e.args[0]) if e.args else "not found")
        except LookupError as e:
            return _error(404, str(e))
        except ValueError as e:
            return _error(400, str(e))

    return functools.wraps(endpoint)(call)


def create_app(session: Session) -> Starlette:
    """The Starlette app of the review (without the token middleware: :func:`serve` adds it)."""
    app = ReviewApp(session)
    routes = [
        Route("/", lambda request: RedirectResponse("/class", status_code=303)),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/class", _page("class.html")),
        Route("/near-duplicates", _page("near_duplicates.html")),
        Route("/api/session", _guarded(app.session_info)),
        Route("/api/class/{wnid}", _guarded(app.class_page)),
        Route("/api/mark", _guarded(app.mark), methods=["POST"]),
        Route("/api/class-state", _guarded(app.class_state), methods=["POST"]),
        Route("/api/near-duplicates", _guarded(app.near_duplicate_list)),
        Route("/api/near-duplicates/{candidate_id}", _guarded(app.near_duplicate_detail)),
        Route("/api/pair", _guarded(app.pair), methods=["POST"]),
        Route("/image/{kind}/{image_id}", _guarded(app.image)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)

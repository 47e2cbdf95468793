"""A fake Flickr on loopback: the REST API's ``flickr.photos.search`` and the photos' image files.

The tests start it (``with FakeFlickr() as flickr``) and point the real client at
``flickr.endpoint`` (``--endpoint``). Photos are registered per query text with an upload date
(:meth:`FakeFlickr.add_photos`); a search answers the photos whose text matches exactly, inside
the taken/upload date windows asked for, sorted by ``sort``, ``per_page`` per page (at most 500),
with the ``extras`` asked for (``url_o``, ``width_o``, ... only for the sizes a photo has). Each
photo's image is a small real JPEG served at ``/images/<id>.jpg`` (optionally with an EXIF
orientation tag, or not an image at all, or 404).

Fault injection (:meth:`FakeFlickr.fault`), each for the next ``times`` API requests:
``"500"``, ``"429"`` (with ``Retry-After``), ``"drop"`` (the connection is closed without an
answer), ``"invalid-json"``; a key other than :attr:`api_key` gets ``stat: fail`` code 100.
Photos without any URL size (``sizes=()``) and images answering 404 (``image_status=404``) are
per photo.

Every API request is recorded in :attr:`requests` (its parameters without ``api_key``, and the
time); image requests in :attr:`image_requests`.
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional
from urllib.parse import parse_qs, urlparse

SIZES = {"o": (1600, 1200), "k": (1400, 1050), "h": (1200, 900), "b": (1024, 768), "c": (800, 600), "z": (640, 480), "m": (500, 375)}


@dataclass
class Photo:
    id: str
    text: str
    uploaded: int  # unix time
    taken: str  # "YYYY-MM-DD HH:MM:SS"
    sizes: tuple = ("o", "z")
    owner: str = "12345@N00"
    orientation: Optional[int] = None  # EXIF orientation tag of its image
    image_status: int = 200
    not_an_image: bool = False
    image_size: tuple = (48, 32)
    also_texts: tuple = ()  # other query texts that find it


@dataclass
class Fault:
    kind: str
    times: int
    retry_after: Optional[str] = None


def jpeg(size=(48, 32), color=(200, 30, 30), orientation: Optional[int] = None) -> bytes:
    """A small JPEG with a marked top-left corner (and optionally an EXIF orientation tag)."""
    from PIL import Image

    image = Image.new("RGB", size, color)
    for x in range(size[0] // 4):
        for y in range(size[1] // 4):
            image.putpixel((x, y), (0, 0, 255))
    buffer = io.BytesIO()
    if orientation is None:
        image.save(buffer, format="JPEG", quality=95)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        image.save(buffer, format="JPEG", quality=95, exif=exif.tobytes())
    return buffer.getvalue()


def _day(text: str) -> float:
    return datetime.strptime(text[:10], "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()


class FakeFlickr:
    """See the module docs."""

    def __init__(self, api_key: str = "fake-key-0123456789abcdef"):
        self.api_key = api_key
        self.photos: dict[str, Photo] = {}
        self.faults: list[Fault] = []
        self.requests: list[dict] = []
        self.image_requests: list[str] = []
        self.lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None

    # --- setup -----------------------------------------------------------------------------
    def add_photos(self, text: str, count: int, *, start: str = "2012-08-01", step_days: float = 1.0, first_id: Optional[int] = None, **kwargs) -> list[Photo]:
        """``count`` photos found by ``text``, uploaded one every ``step_days`` from ``start``."""
        base = first_id if first_id is not None else 7_000_000_000 + len(self.photos) * 1000
        fixed_taken = kwargs.pop("taken", None)
        added = []
        for i in range(count):
            uploaded = int(_day(start) + i * step_days * 86400 + 3600)
            taken = fixed_taken or datetime.fromtimestamp(uploaded - 7200, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            photo = Photo(str(base + i), text, uploaded, taken, **kwargs)
            self.photos[photo.id] = photo
            added.append(photo)
        return added

    def add_photo(self, photo_id: str, text: str, uploaded: str = "2012-09-01", **kwargs) -> Photo:
        photo = Photo(photo_id, text, int(_day(uploaded) + 3600), uploaded + " 10:00:00", **kwargs)
        self.photos[photo_id] = photo
        return photo

    def fault(self, kind: str, times: int = 1, retry_after: Optional[str] = None) -> None:
        if kind not in ("500", "429", "drop", "invalid-json"):
            raise ValueError(kind)
        self.faults.append(Fault(kind, times, retry_after))

    # --- server ------------------------------------------------------------------------------
    def __enter__(self) -> "FakeFlickr":
        handler = type("Handler", (_Handler,), {"flickr": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-flickr", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def endpoint(self) -> str:
        return f"{self.base}/services/rest/"

    # --- answers -----------------------------------------------------------------------------
    def take_fault(self) -> Optional[Fault]:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def search(self, params: dict) -> dict:
        if params.get("api_key") != self.api_key:
            return {"stat": "fail", "code": 100, "message": "Invalid API Key (Key has invalid format)"}
        if params.get("method") != "flickr.photos.search":
            return {"stat": "fail", "code": 112, "message": f"Method \"{params.get('method')}\" not found"}
        low_up, high_up = _day(params["min_upload_date"]), _day(params["max_upload_date"])
        low_taken, high_taken = params["min_taken_date"], params["max_taken_date"]
        hits = [p for p in self.photos.values() if params.get("text") in (p.text, *p.also_texts) and low_up <= p.uploaded <= high_up
                and low_taken <= p.taken[:10] <= high_taken]
        hits.sort(key=lambda p: (p.uploaded, p.id), reverse=params.get("sort") == "date-posted-desc")
        per_page = min(int(params.get("per_page", 100)), 500)
        page = int(params.get("page", 1))
        chunk = hits[(page - 1) * per_page: page * per_page]
        extras = set(params.get("extras", "").split(","))
        pages = max(1, -(-len(hits) // per_page))
        return {"photos": {"page": page, "pages": pages, "perpage": per_page, "total": str(len(hits)),
                           "photo": [self.photo_json(p, extras) for p in chunk]}, "stat": "ok"}

    def photo_json(self, photo: Photo, extras: set) -> dict:
        data = {"id": photo.id, "owner": photo.owner, "secret": "abc", "server": "1", "farm": 1, "title": photo.text, "ispublic": 1}
        if "date_upload" in extras:
            data["dateupload"] = str(photo.uploaded)
        if "date_taken" in extras:
            data["datetaken"], data["datetakengranularity"] = photo.taken, "0"
        if "owner_name" in extras:
            data["ownername"] = "someone"
        if "o_dims" in extras and "o" in photo.sizes:
            data["o_width"], data["o_height"] = str(SIZES["o"][0]), str(SIZES["o"][1])
        for size in photo.sizes:
            if f"url_{size}" in extras:
                data[f"url_{size}"] = f"{self.base}/images/{photo.id}_{size}.jpg"
                data[f"width_{size}"], data[f"height_{size}"] = SIZES[size]
        return data

    def image(self, name: str) -> tuple[int, str, bytes]:
        photo = self.photos.get(name.split("_")[0].split(".")[0])
        if photo is None or photo.image_status != 200:
            return (photo.image_status if photo else 404), "text/html", b"<html>not found</html>"
        if photo.not_an_image:
            return 200, "text/html", b"<html><body>This is not the image you are looking for</body></html>"
        shade = int(photo.id) % 200
        return 200, "image/jpeg", jpeg(photo.image_size, (shade, 100, 50), photo.orientation)


class _Handler(BaseHTTPRequestHandler):
    flickr: FakeFlickr
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", headers: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path.startswith("/images/"):
            self.flickr.image_requests.append(url.path)
            status, kind, body = self.flickr.image(url.path[len("/images/"):])
            return self._send(status, body, kind)
        self._api({k: v[-1] for k, v in parse_qs(url.query).items()})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length).decode()
        self._api({k: v[-1] for k, v in parse_qs(body).items()})

    def _api(self, params: dict) -> None:
        flickr = self.flickr
        record = {k: v for k, v in params.items() if k != "api_key"}
        record["_time"] = time.monotonic()
        record["_key_ok"] = params.get("api_key") == flickr.api_key
        with flickr.lock:
            flickr.requests.append(record)
        fault = flickr.take_fault()
        if fault is not None:
            record["_fault"] = fault.kind
            if fault.kind == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault.kind == "invalid-json":
                return self._send(200, b'{"photos": {"page": 1, "photo": [')
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return self._send(int(fault.kind), b"<html>busy</html>", "text/html", headers)
        self._send(200, json.dumps(flickr.search(params)).encode())

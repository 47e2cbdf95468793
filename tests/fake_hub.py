"""A small fake Hugging Face Hub on loopback, for tests that push and pull with the real clients.

It implements the HTTP endpoints that ``huggingface_hub`` (``HfApi``, ``hf_hub_download``,
``HfFileSystem``), ``datasets.load_dataset`` and ``evaluate.load`` call for what this project does:

======================================================  =========================================
``POST /api/repos/create``                              create a model, dataset or space repo
``GET  /api/whoami-v2``                                 who the token belongs to
``POST /api/validate-yaml``                             README.md metadata check before a commit
``GET  /api/{type}s/{ns}/{name}[/revision/{rev}]``      repo info (``sha``, ``siblings``, ...)
``GET  /api/{type}s/{ns}/{name}/refs``                  branches and tags
``GET  /api/{type}s/{ns}/{name}/commits/{rev}``         history of a revision
``GET  /api/{type}s/{ns}/{name}/tree/{rev}[/{path}]``   tree listing (``recursive=``)
``POST /api/{type}s/{ns}/{name}/paths-info/{rev}``      info on given paths (form data)
``POST /api/{type}s/{ns}/{name}/preupload/{rev}``       upload mode per file ("lfs" / "regular")
``POST /{prefix}{ns}/{name}.git/info/lfs/objects/batch`` LFS batch API (basic transfer)
``PUT  /__lfs/upload/{sha256}?size=&sig=``              LFS object upload (sha256 and size checked)
``POST /__lfs/verify``                                  LFS verify action
``POST /api/{type}s/{ns}/{name}/commit/{branch}``       NDJSON commit (file, lfsFile, deleted*)
``POST|DELETE /api/{type}s/{ns}/{name}/tag/{rev}``      create a tag on a revision / delete a tag
``POST|DELETE /api/{type}s/{ns}/{name}/branch/{name}``  create / delete a branch
``HEAD|GET /{prefix}{ns}/{name}/resolve/{rev}/{path}``  file content (``X-Repo-Commit``, ``ETag``,
                                                        ``X-Linked-Etag``/``-Size``, ``Range``)
======================================================  =========================================

``{prefix}`` is ``datasets/``, ``spaces/`` or nothing (models). Every commit is an immutable
snapshot (path -> blob); branches and tags point at commits; file contents are stored once per
sha256 in a temporary folder. A new repo starts with one commit holding ``.gitattributes``, like
the real Hub. Any other request is answered 501 and recorded in :attr:`FakeHub.unknown_requests`
(and logged as a warning), so a gap in the fake shows up at once.

Fault injection (deterministic: the real client retries some failures, so a fault lasts for
``times`` matching requests, or until :meth:`FakeHub.clear_faults` when ``times`` is None):

* ``hub.fail("commit", status=500)`` answers the operation with an HTTP error;
* ``hub.drop("lfs_upload")`` reads half of the request body, then closes the connection;
* ``hub.reject_tokens = True`` answers every request carrying a token with 401
  "Invalid credentials in Authorization header", as the Hub does for a revoked token.

Operation names: see :data:`OPERATIONS`. Every request is recorded in :attr:`FakeHub.requests`
(method, path, operation, status) -- never its headers, so no token is ever kept.

Usage (or the pytest fixture :func:`fake_hub_server`)::

    with fake_hub(tmp_path / "hub") as hub:
        env = {**os.environ, **hub.client_env(tmp_path / "hf_home")}   # HF_ENDPOINT, HF_TOKEN, ...
        subprocess.run([...], env=env)

The clients read ``HF_ENDPOINT`` when they are imported, so run them in a subprocess with
:meth:`FakeHub.client_env` (the robust choice), or set the variable before any import.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import parse_qs, quote, unquote, urlsplit

logger = logging.getLogger(__name__)

REPO_TYPES = ("model", "dataset", "space")
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}
DEFAULT_BRANCH = "main"

# Operations that change the Hub (or prepare a change): a dry run must make none of them.
WRITE_OPERATIONS = frozenset(
    {
        "create_repo",
        "preupload",
        "lfs_batch",
        "lfs_upload",
        "lfs_verify",
        "commit",
        "create_tag",
        "delete_tag",
        "create_branch",
        "delete_branch",
    }
)
READ_OPERATIONS = frozenset(
    {"whoami", "validate_yaml", "repo_info", "refs", "commits", "tree", "paths_info", "resolve"}
)
OPERATIONS = WRITE_OPERATIONS | READ_OPERATIONS

# Files stored with LFS whatever their size, as in the Hub's default .gitattributes.
LFS_SUFFIXES = (
    ".parquet", ".arrow", ".bin", ".npy", ".npz", ".pt", ".pth", ".safetensors", ".h5", ".pkl",
    ".zip", ".gz", ".tar", ".tgz", ".zst", ".jpg", ".jpeg", ".png", ".webp", ".ckpt", ".onnx",
)  # fmt: skip
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
GITATTRIBUTES = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES).encode()
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob (what the Hub reports for a regular file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --- storage -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    """One file of a commit: its content's sha256 (the key in the blob store) and size."""

    sha256: str
    size: int
    lfs: bool
    git_oid: str  # of the content (regular) or of the LFS pointer (lfs)

    def api_dict(self, path: str) -> dict:
        info = {"type": "file", "oid": self.git_oid, "size": self.size, "path": path}
        if self.lfs:
            pointer = lfs_pointer(self.sha256, self.size)
            info["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(pointer)}
        return info


@dataclass(frozen=True)
class Commit:
    oid: str
    parent: Optional[str]
    title: str
    message: str
    date: str
    author: str
    files: dict  # path -> FileEntry (never mutated after creation)


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    sdk: Optional[str]
    created_at: str
    commits: dict = field(default_factory=dict)  # oid -> Commit
    branches: dict = field(default_factory=dict)  # name -> oid
    tags: dict = field(default_factory=dict)  # name -> oid
    tag_messages: dict = field(default_factory=dict)

    def resolve(self, revision: str) -> Optional[str]:
        """Commit oid of a branch, a tag, a full or short commit oid, or a refs/... name."""
        for prefix, table in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if revision.startswith(prefix):
                return table.get(revision[len(prefix) :])
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.tags:
            return self.tags[revision]
        if revision in self.commits:
            return revision
        if 7 <= len(revision) < 40:
            matches = [oid for oid in self.commits if oid.startswith(revision)]
            if len(matches) == 1:
                return matches[0]
        return None


@dataclass
class Fault:
    """An injected failure of one operation: ``kind`` "status" (answer ``status``) or "drop"."""

    operation: str
    kind: str
    status: int = 500
    times: Optional[int] = None  # None: until cleared
    hits: int = 0

    def take(self) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    operation: Optional[str]
    status: Optional[int]  # None when the connection was dropped


class HubError(Exception):
    """An HTTP error answer: status, message, and the Hub's X-Error-Code when there is one."""

    def __init__(self, status: int, message: str, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class _Dropped(Exception):
    """The handler closed the connection on purpose (fault injection)."""


# --- the server ------------------------------------------------------------------------------


class FakeHub:
    """A fake Hub on ``127.0.0.1`` with real storage, refs, LFS and fault injection.

    ``token`` is a valid write token of user ``user``; ``read_token`` a valid read-only one.
    """

    def __init__(self, root: os.PathLike | str | None = None, *, user: str = "fake-user"):
        self._owns_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="fake-hub-"))
        self.blob_dir = self.root / "blobs"
        self.blob_dir.mkdir(parents=True, exist_ok=True)
        self.user = user
        self.token = "hf_fake_write_" + secrets.token_hex(12)
        self.read_token = "hf_fake_read_" + secrets.token_hex(12)
        self._tokens = {self.token: "write", self.read_token: "read"}
        self._signing_key = secrets.token_bytes(16)
        self.reject_tokens = False
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs_objects: set[str] = set()
        self._requests: list[RequestRecord] = []
        self.unknown_requests: list[str] = []
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._settled = threading.Condition(self._lock)
        self._in_flight = 0
        self._counter = 0
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle

    def start(self) -> "FakeHub":
        handler = type("Handler", (_Handler,), {"hub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)
        self._thread.start()
        logger.info("fake Hub listening at %s", self.endpoint)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake Hub is not running: call start() or use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def client_env(self, hf_home: os.PathLike | str, *, token: Optional[str] = "default") -> dict[str, str]:
        """Environment for a client subprocess: endpoint, fresh caches, no Xet, and the token.

        ``token="default"`` gives the write token; None leaves HF_TOKEN out.
        """
        hf_home = Path(hf_home)
        env = {
            "HF_ENDPOINT": self.endpoint,
            "HF_HOME": str(hf_home),
            "HF_HUB_CACHE": str(hf_home / "hub"),
            "HF_DATASETS_CACHE": str(hf_home / "datasets"),
            "HF_EVALUATE_CACHE": str(hf_home / "evaluate"),
            "HF_MODULES_CACHE": str(hf_home / "modules"),
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        if token == "default":
            token = self.token
        if token is not None:
            env["HF_TOKEN"] = token
        return env

    # -- fault injection

    def fail(self, operation: str, *, status: int = 500, times: Optional[int] = None) -> Fault:
        """Answer the next ``times`` requests of ``operation`` (all, if None) with ``status``."""
        return self._add_fault(Fault(operation, "status", status=status, times=times))

    def drop(self, operation: str, *, times: Optional[int] = None) -> Fault:
        """Close the connection halfway through the body of the next ``times`` ``operation`` requests."""
        return self._add_fault(Fault(operation, "drop", times=times))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
        self.reject_tokens = False

    def _add_fault(self, fault: Fault) -> Fault:
        if fault.operation not in OPERATIONS:
            raise ValueError(f"unknown operation {fault.operation!r}; expected one of {sorted(OPERATIONS)}")
        with self._lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, operation: str) -> Optional[Fault]:
        with self._lock:
            for fault in self._faults:
                if fault.operation == operation and fault.take():
                    return fault
        return None

    # -- inspection helpers for tests

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request so far, in arrival order. A request is recorded after its response is
        sent, so this waits (up to 5 s) until no request is in flight: a client that has its
        answer finds its request here."""
        with self._settled:
            self._settled.wait_for(lambda: self._in_flight == 0, timeout=5)
            return list(self._requests)

    def operations(self, *names: str) -> list[RequestRecord]:
        """Recorded requests of the given operations (all requests if no name is given)."""
        return [r for r in self.requests if not names or r.operation in names]

    def write_requests(self) -> list[RequestRecord]:
        return self.operations(*WRITE_OPERATIONS)

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        with self._lock:
            try:
                return self.repos[(repo_type, repo_id)]
            except KeyError:
                raise KeyError(f"no {repo_type} repo {repo_id} on the fake Hub") from None

    def read_file(self, repo_id: str, path: str, revision: str = DEFAULT_BRANCH, repo_type: str = "dataset") -> bytes:
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            oid = repo.resolve(revision)
            if oid is None:
                raise KeyError(f"no revision {revision!r} in {repo_id}")
            entry = repo.commits[oid].files[path]
        return self._blob_path(entry.sha256).read_bytes()

    def list_files(self, repo_id: str, revision: str = DEFAULT_BRANCH, repo_type: str = "dataset") -> list[str]:
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            oid = repo.resolve(revision)
            if oid is None:
                raise KeyError(f"no revision {revision!r} in {repo_id}")
            return sorted(repo.commits[oid].files)

    # -- storage

    def _blob_path(self, sha256: str) -> Path:
        return self.blob_dir / sha256

    def _store_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self._blob_path(sha)
        if not path.exists():
            tmp = path.with_name(f".{sha}.{secrets.token_hex(4)}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def _new_commit(self, repo: Repo, parent: Optional[str], files: dict, title: str, message: str, author: str) -> Commit:
        with self._lock:
            self._counter += 1
            counter = self._counter
        material = json.dumps(
            [parent, sorted((p, e.git_oid) for p, e in files.items()), title, message, counter, repo.repo_id]
        )
        oid = hashlib.sha1(material.encode()).hexdigest()
        commit = Commit(oid, parent, title, message, _now(), author, dict(files))
        repo.commits[oid] = commit
        return commit

    def sign(self, sha256: str, size: int) -> str:
        return hmac.new(self._signing_key, f"{sha256}:{size}".encode(), "sha256").hexdigest()[:32]


# --- request handling ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1.0"

    def log_message(self, format, *args):  # quiet; every request is in hub.requests
        logger.debug("%s - %s", self.address_string(), format % args)

    # -- plumbing

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        with self.hub._lock:
            self.hub._in_flight += 1
        split = urlsplit(self.path)
        self.query = {k: v for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self.segments = split.path.split("/")[1:]  # raw (still percent-encoded) segments
        self._body: Optional[bytes] = None
        self.operation: Optional[str] = None
        status: Optional[int] = None
        try:
            route = self._route(method)
            if route is None:
                self._read_body()
                message = f"fake Hub: no route for {method} {split.path}"
                logger.warning("UNKNOWN REQUEST %s %s", method, self.path)
                with self.hub._lock:
                    self.hub.unknown_requests.append(f"{method} {self.path}")
                raise HubError(501, message)
            self.operation, handler, args = route
            fault = self.hub._take_fault(self.operation)
            if fault is not None and fault.kind == "drop":
                self._drop_midway()
            self._check_auth()
            if fault is not None:
                self._read_body()
                raise HubError(fault.status, f"fake Hub: injected failure of {self.operation}")
            status = handler(*args)
        except _Dropped:
            status = None
        except HubError as e:
            status = e.status
            self._send_error(e)
        except (BrokenPipeError, ConnectionResetError):
            status = None
            self.close_connection = True
        except Exception as e:  # a bug in the fake: say so loudly, answer 500
            logger.exception("fake Hub crashed on %s %s", method, self.path)
            status = 500
            with contextlib.suppress(Exception):
                self._send_error(HubError(500, f"fake Hub internal error: {type(e).__name__}: {e}"))
        finally:
            with self.hub._settled:
                self.hub._requests.append(RequestRecord(method, split.path, self.operation, status))
                self.hub._in_flight -= 1
                self.hub._settled.notify_all()

    def _route(self, method: str):
        s = [unquote(x) for x in self.segments]
        raw = self.segments
        n = len(s)
        if n >= 2 and s[0] == "api":
            if s[1:] == ["repos", "create"] and method == "POST":
                return "create_repo", self._create_repo, ()
            if s[1:] == ["whoami-v2"] and method == "GET":
                return "whoami", self._whoami, ()
            if s[1:] == ["validate-yaml"] and method == "POST":
                return "validate_yaml", self._validate_yaml, ()
            if n >= 4 and s[1] in ("models", "datasets", "spaces"):
                repo_type = s[1][:-1]
                repo_id = f"{s[2]}/{s[3]}"
                rest, raw_rest = s[4:], raw[4:]
                if not rest and method == "GET":
                    return "repo_info", self._repo_info, (repo_type, repo_id, None)
                if len(rest) == 2 and rest[0] == "revision" and method == "GET":
                    return "repo_info", self._repo_info, (repo_type, repo_id, rest[1])
                if rest == ["refs"] and method == "GET":
                    return "refs", self._refs, (repo_type, repo_id)
                if len(rest) == 2 and rest[0] == "commits" and method == "GET":
                    return "commits", self._commits, (repo_type, repo_id, rest[1])
                if len(rest) >= 2 and rest[0] == "tree" and method == "GET":
                    path = "/".join(unquote(x) for x in raw_rest[2:])
                    return "tree", self._tree, (repo_type, repo_id, rest[1], path)
                if len(rest) == 2 and rest[0] == "paths-info" and method == "POST":
                    return "paths_info", self._paths_info, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "preupload" and method == "POST":
                    return "preupload", self._preupload, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "commit" and method == "POST":
                    return "commit", self._commit, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "tag" and method == "POST":
                    return "create_tag", self._create_tag, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "tag" and method == "DELETE":
                    return "delete_tag", self._delete_tag, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "branch" and method == "POST":
                    return "create_branch", self._create_branch, (repo_type, repo_id, rest[1])
                if len(rest) == 2 and rest[0] == "branch" and method == "DELETE":
                    return "delete_branch", self._delete_branch, (repo_type, repo_id, rest[1])
            return None
        if n >= 2 and s[0] == "__lfs":
            if s[1] == "upload" and n == 3 and method == "PUT":
                return "lfs_upload", self._lfs_upload, (s[2],)
            if s[1] == "verify" and n == 2 and method == "POST":
                return "lfs_verify", self._lfs_verify, ()
            return None
        repo_type, offset = "model", 0
        if n and s[0] in ("datasets", "spaces"):
            repo_type, offset = s[0][:-1], 1
        rest = s[offset:]
        if len(rest) == 6 and rest[1].endswith(".git") and rest[2:] == ["info", "lfs", "objects", "batch"]:
            if method == "POST":
                return "lfs_batch", self._lfs_batch, (repo_type, f"{rest[0]}/{rest[1][:-4]}")
            return None
        if len(rest) >= 5 and rest[2] == "resolve" and method in ("GET", "HEAD"):
            path = "/".join(unquote(x) for x in raw[offset + 4 :])
            return "resolve", self._resolve, (repo_type, f"{rest[0]}/{rest[1]}", rest[3], path, method)
        return None

    def _read_body(self) -> bytes:
        if self._body is not None:
            return self._body
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self._body = b"".join(chunks)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            self._body = self.rfile.read(length) if length else b""
        return self._body

    def _drop_midway(self) -> None:
        """Read about half of the body, then close the socket without answering."""
        length = int(self.headers.get("Content-Length") or 0)
        with contextlib.suppress(OSError):
            if length:
                self.rfile.read(max(1, length // 2))
            else:
                self.rfile.read1(65536) if hasattr(self.rfile, "read1") else None
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.connection.close()
        raise _Dropped()

    def _json_body(self):
        body = self._read_body()
        try:
            return json.loads(body or b"{}")
        except ValueError:
            raise HubError(400, "request body is not valid JSON") from None

    def _send(self, status: int, body: bytes = b"", content_type: str = "application/json", headers=None) -> int:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        return status

    def _send_json(self, obj, status: int = 200, headers=None) -> int:
        return self._send(status, json.dumps(obj).encode(), headers=headers)

    def _send_error(self, e: HubError) -> None:
        self._read_body()
        headers = {"X-Error-Message": e.message}
        if e.code:
            headers["X-Error-Code"] = e.code
        self._send(e.status, json.dumps({"error": e.message}).encode(), headers=headers)

    # -- auth

    def _token(self) -> Optional[str]:
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return None

    def _check_auth(self) -> None:
        token = self._token()
        self.role = None
        if token is None:
            return
        if self.hub.reject_tokens or token not in self.hub._tokens:
            raise HubError(401, INVALID_CREDENTIALS)
        self.role = self.hub._tokens[token]

    def _require_write(self) -> str:
        if self.role is None:
            raise HubError(401, "You must be authenticated to do this: pass a token (Authorization: Bearer ...)")
        if self.role != "write":
            raise HubError(403, "Your token does not have write access")
        return self.hub.user

    def _get_repo(self, repo_type: str, repo_id: str) -> Repo:
        with self.hub._lock:
            repo = self.hub.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and self.role is None):
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    def _get_commit(self, repo: Repo, revision: str) -> Commit:
        with self.hub._lock:
            oid = repo.resolve(revision)
            if oid is None:
                raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
            return repo.commits[oid]

    # -- endpoints: account and repos

    def _whoami(self) -> int:
        if self.role is None:
            raise HubError(401, "You must be authenticated to call whoami")
        return self._send_json(
            {
                "type": "user",
                "name": self.hub.user,
                "fullname": "Fake User",
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "fake", "role": self.role}},
            }
        )

    def _validate_yaml(self) -> int:
        payload = self._json_body()
        content = payload.get("content", "")
        errors = []
        if content.startswith("---"):
            end = content.find("\n---", 3)
            if end < 0:
                errors.append({"message": "README.md front matter is not closed by '---'"})
            else:
                try:
                    import yaml

                    data = yaml.safe_load(content[3:end])
                    if data is not None and not isinstance(data, dict):
                        errors.append({"message": "README.md metadata must be a mapping"})
                except ImportError:
                    pass
                except Exception as e:  # yaml.YAMLError
                    errors.append({"message": f"invalid YAML: {e}"})
        if errors:
            return self._send_json({"errors": errors, "warnings": []}, status=400)
        return self._send_json({"errors": [], "warnings": []})

    def _create_repo(self) -> int:
        author = self._require_write()
        payload = self._json_body()
        repo_type = payload.get("type") or "model"
        if repo_type not in REPO_TYPES:
            raise HubError(400, f"invalid repo type {repo_type!r}")
        name, namespace = payload.get("name"), payload.get("organization") or self.hub.user
        if not name:
            raise HubError(400, "missing repo name")
        if repo_type == "space" and not payload.get("sdk"):
            raise HubError(400, "a Space needs an sdk")
        repo_id = f"{namespace}/{name}"
        private = payload.get("private")
        if private is None:
            private = payload.get("visibility") == "private"
        with self.hub._lock:
            if (repo_type, repo_id) in self.hub.repos:
                raise HubError(409, "You already created this repo")
            repo = Repo(repo_type, repo_id, bool(private), payload.get("sdk"), _now())
            sha = self.hub._store_blob(GITATTRIBUTES)
            files = {".gitattributes": FileEntry(sha, len(GITATTRIBUTES), False, git_blob_oid(GITATTRIBUTES))}
            commit = self.hub._new_commit(repo, None, files, "initial commit", "", author)
            repo.branches[DEFAULT_BRANCH] = commit.oid
            self.hub.repos[(repo_type, repo_id)] = repo
        url = f"{self.hub.endpoint}/{URL_PREFIXES[repo_type]}{repo_id}"
        return self._send_json({"url": url, "name": repo_id, "id": repo_id})

    def _repo_info(self, repo_type: str, repo_id: str, revision: Optional[str]) -> int:
        repo = self._get_repo(repo_type, repo_id)
        commit = self._get_commit(repo, revision or DEFAULT_BRANCH)
        with_blobs = self.query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = []
        for path, entry in sorted(commit.files.items()):
            sibling: dict = {"rfilename": path}
            if with_blobs:
                sibling.update(size=entry.size, blobId=entry.git_oid)
                if entry.lfs:
                    sibling["lfs"] = {
                        "size": entry.size,
                        "sha256": entry.sha256,
                        "pointerSize": len(lfs_pointer(entry.sha256, entry.size)),
                    }
            siblings.append(sibling)
        info = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": commit.oid,
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "createdAt": repo.created_at,
            "lastModified": commit.date,
            "tags": [],
            "downloads": 0,
            "likes": 0,
            "siblings": siblings,
        }
        card = self._card_data(commit)
        if card is not None:
            info["cardData"] = card
        if repo_type == "space":
            info["sdk"] = repo.sdk
        return self._send_json(info)

    def _card_data(self, commit: Commit):
        entry = commit.files.get("README.md")
        if entry is None:
            return None
        text = self.hub._blob_path(entry.sha256).read_text(encoding="utf-8", errors="replace")
        if not text.startswith("---"):
            return None
        end = text.find("\n---", 3)
        try:
            import yaml

            data = yaml.safe_load(text[3:end])
        except Exception:
            return None
        return data if isinstance(data, dict) else None

    def _refs(self, repo_type: str, repo_id: str) -> int:
        repo = self._get_repo(repo_type, repo_id)
        with self.hub._lock:
            branches = [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": o} for b, o in sorted(repo.branches.items())]
            tags = [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": o} for t, o in sorted(repo.tags.items())]
        return self._send_json({"branches": branches, "tags": tags, "converts": [], "pullRequests": []})

    def _commits(self, repo_type: str, repo_id: str, revision: str) -> int:
        repo = self._get_repo(repo_type, repo_id)
        commit = self._get_commit(repo, revision)
        items = []
        while commit is not None:
            items.append(
                {
                    "id": commit.oid,
                    "title": commit.title,
                    "message": commit.message,
                    "authors": [{"user": commit.author}],
                    "date": commit.date,
                }
            )
            commit = repo.commits.get(commit.parent) if commit.parent else None
        return self._send_json(items)

    # -- endpoints: reading files

    @staticmethod
    def _folder_oid(commit: Commit, folder: str) -> str:
        prefix = folder + "/" if folder else ""
        material = json.dumps(sorted((p, e.git_oid) for p, e in commit.files.items() if p.startswith(prefix)))
        return hashlib.sha1(material.encode()).hexdigest()

    @staticmethod
    def _folders(commit: Commit) -> set:
        folders = set()
        for path in commit.files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folders.add("/".join(parts[:i]))
        return folders

    def _tree(self, repo_type: str, repo_id: str, revision: str, path: str) -> int:
        repo = self._get_repo(repo_type, repo_id)
        commit = self._get_commit(repo, revision)
        path = path.strip("/")
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        folders = self._folders(commit)
        if path and path not in folders:
            if path in commit.files:
                raise HubError(400, f"{path} is a file, not a folder")
            raise HubError(404, f"{path} does not exist at {revision}", "EntryNotFound")
        prefix = path + "/" if path else ""
        entries = []
        for folder in sorted(folders):
            if folder.startswith(prefix) and (recursive or "/" not in folder[len(prefix) :]):
                entries.append({"type": "directory", "oid": self._folder_oid(commit, folder), "size": 0, "path": folder})
        for file_path, entry in sorted(commit.files.items()):
            if file_path.startswith(prefix) and (recursive or "/" not in file_path[len(prefix) :]):
                entries.append(entry.api_dict(file_path))
        return self._send_json(entries)

    def _paths_info(self, repo_type: str, repo_id: str, revision: str) -> int:
        repo = self._get_repo(repo_type, repo_id)
        commit = self._get_commit(repo, revision)
        body = self._read_body().decode()
        if "json" in self.headers.get("Content-Type", ""):
            paths = json.loads(body or "{}").get("paths", [])
        else:
            paths = parse_qs(body, keep_blank_values=True).get("paths", [])
        folders = self._folders(commit)
        entries = []
        for path in paths:
            path = path.strip("/")
            if path in commit.files:
                entries.append(commit.files[path].api_dict(path))
            elif path in folders:
                entries.append({"type": "directory", "oid": self._folder_oid(commit, path), "size": 0, "path": path})
        return self._send_json(entries)

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str, method: str) -> int:
        repo = self._get_repo(repo_type, repo_id)
        commit = self._get_commit(repo, revision)
        entry = commit.files.get(path)
        headers = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes"}
        if entry is None:
            self._read_body()
            headers.update({"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})
            return self._send(404, b"Entry not found", "text/plain", headers)
        data = self.hub._blob_path(entry.sha256).read_bytes()
        if entry.lfs:
            headers.update({"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)})
            headers["ETag"] = f'"{entry.sha256}"'
        else:
            headers["ETag"] = f'"{entry.git_oid}"'
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            start_s, _, end_s = range_header[6:].split(",")[0].partition("-")
            size = len(data)
            if start_s == "":
                start, end = max(0, size - int(end_s)), size - 1
            else:
                start = int(start_s)
                end = min(int(end_s), size - 1) if end_s else size - 1
            if start >= size or start > end:
                headers["Content-Range"] = f"bytes */{size}"
                return self._send(416, b"", "text/plain", headers)
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            return self._send(206, data[start : end + 1], "application/octet-stream", headers)
        return self._send(200, data, "application/octet-stream", headers)

    # -- endpoints: writing

    def _preupload(self, repo_type: str, repo_id: str, revision: str) -> int:
        self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        payload = self._json_body()
        with self.hub._lock:
            oid = repo.resolve(revision)
            files = repo.commits[oid].files if oid else {}
        answer = []
        for f in payload.get("files", []):
            path, size = f["path"], int(f["size"])
            sample = base64.b64decode(f.get("sample", ""))
            lfs = path.lower().endswith(LFS_SUFFIXES) or size >= LFS_SIZE_THRESHOLD or b"\0" in sample
            remote = files.get(path)
            remote_oid = None
            if remote is not None:
                remote_oid = remote.sha256 if remote.lfs else remote.git_oid
            answer.append(
                {"path": path, "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": remote_oid}
            )
        return self._send_json({"files": answer, "commitOid": oid})

    def _lfs_batch(self, repo_type: str, repo_id: str) -> int:
        self._require_write()
        self._get_repo(repo_type, repo_id)
        payload = self._json_body()
        if payload.get("operation") != "upload":
            raise HubError(400, "the fake Hub only implements LFS uploads")
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            item = {"oid": oid, "size": size, "authenticated": True}
            with self.hub._lock:
                present = oid in self.hub.lfs_objects
            if not present:
                sig = self.hub.sign(oid, size)
                item["actions"] = {
                    "upload": {"href": f"{self.hub.endpoint}/__lfs/upload/{oid}?size={size}&sig={sig}", "header": {}},
                    "verify": {"href": f"{self.hub.endpoint}/__lfs/verify", "header": {}},
                }
            objects.append(item)
        return self._send_json({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _lfs_upload(self, oid: str) -> int:
        size = int(self.query.get("size", ["-1"])[0])
        sig = self.query.get("sig", [""])[0]
        if not hmac.compare_digest(sig, self.hub.sign(oid, size)):
            raise HubError(403, "invalid or missing upload signature")
        data = self._read_body()
        actual = hashlib.sha256(data).hexdigest()
        if len(data) != size or actual != oid:
            raise HubError(400, f"uploaded object does not match: expected sha256 {oid} and {size} bytes, got {actual} and {len(data)} bytes")
        self.hub._store_blob(data)
        with self.hub._lock:
            self.hub.lfs_objects.add(oid)
        return self._send(200, b"", headers={"ETag": f'"{oid}"'})

    def _lfs_verify(self) -> int:
        self._require_write()
        payload = self._json_body()
        oid, size = payload.get("oid"), payload.get("size")
        with self.hub._lock:
            present = oid in self.hub.lfs_objects
        if not present or self.hub._blob_path(oid).stat().st_size != size:
            raise HubError(404, f"LFS object {oid} of size {size} was not uploaded")
        return self._send_json({"oid": oid, "size": size})

    def _commit(self, repo_type: str, repo_id: str, revision: str) -> int:
        author = self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        body = self._read_body()
        try:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError:
            raise HubError(400, "commit body is not valid NDJSON") from None
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "commit body must start with a header line")
        header = lines[0]["value"]
        title = header.get("summary") or ""
        if not title:
            raise HubError(400, "commit summary (message) is empty")
        if self.query.get("create_pr"):
            raise HubError(400, "the fake Hub does not implement pull requests")
        with self.hub._lock:
            if revision not in repo.branches:
                raise HubError(404, f"Invalid rev id: {revision} is not a branch", "RevisionNotFound")
            head = repo.branches[revision]
            parent_commit = header.get("parentCommit")
            if parent_commit is not None and parent_commit != head:
                raise HubError(412, f"A commit has happened since {parent_commit}: the branch head is {head}")
            files = dict(repo.commits[head].files)
            for line in lines[1:]:
                key, value = line.get("key"), line.get("value", {})
                path = value.get("path", "")
                if not path or path.startswith("/") or ".." in path.split("/"):
                    raise HubError(400, f"invalid path in commit: {path!r}")
                if key == "file":
                    if value.get("encoding", "base64") != "base64":
                        raise HubError(400, f"unsupported encoding {value.get('encoding')!r}")
                    data = base64.b64decode(value["content"])
                    sha = self.hub._store_blob(data)
                    files[path] = FileEntry(sha, len(data), False, git_blob_oid(data))
                elif key == "lfsFile":
                    oid = value["oid"]
                    if oid not in self.hub.lfs_objects:
                        raise HubError(422, f"LFS object {oid} for {path} was never uploaded")
                    size = self.hub._blob_path(oid).stat().st_size
                    if "size" in value and int(value["size"]) != size:
                        raise HubError(422, f"size of {path} does not match its LFS object")
                    files[path] = FileEntry(oid, size, True, git_blob_oid(lfs_pointer(oid, size)))
                elif key == "deletedFile":
                    if path not in files:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                    del files[path]
                elif key == "deletedFolder":
                    prefix = path.rstrip("/") + "/"
                    doomed = [p for p in files if p.startswith(prefix)]
                    if not doomed:
                        raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                    for p in doomed:
                        del files[p]
                else:
                    raise HubError(400, f"unknown commit operation {key!r}")
            commit = self.hub._new_commit(repo, head, files, title, header.get("description", ""), author)
            repo.branches[revision] = commit.oid
        url = f"{self.hub.endpoint}/{URL_PREFIXES[repo_type]}{repo_id}/commit/{commit.oid}"
        return self._send_json({"success": True, "commitOid": commit.oid, "commitUrl": url})

    @staticmethod
    def _check_ref_name(name: str, what: str) -> None:
        if not name or name.startswith(("refs/", "/")) or ".." in name or any(c in name for c in " ~^:?*[\\"):
            raise HubError(400, f"invalid {what} name {name!r}")

    def _create_tag(self, repo_type: str, repo_id: str, revision: str) -> int:
        self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        payload = self._json_body()
        tag = payload.get("tag", "")
        self._check_ref_name(tag, "tag")
        commit = self._get_commit(repo, revision)
        with self.hub._lock:
            if tag in repo.tags:
                raise HubError(409, f"Tag {tag} already exists")
            repo.tags[tag] = commit.oid
            repo.tag_messages[tag] = payload.get("message")
        return self._send_json({"success": True})

    def _delete_tag(self, repo_type: str, repo_id: str, tag: str) -> int:
        self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        with self.hub._lock:
            if tag not in repo.tags:
                raise HubError(404, f"Tag {tag} does not exist", "RevisionNotFound")
            del repo.tags[tag]
        return self._send_json({"success": True})

    def _create_branch(self, repo_type: str, repo_id: str, branch: str) -> int:
        self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        payload = self._json_body()
        self._check_ref_name(branch, "branch")
        commit = self._get_commit(repo, payload.get("startingPoint") or DEFAULT_BRANCH)
        with self.hub._lock:
            if branch in repo.branches:
                raise HubError(409, f"Reference refs/heads/{branch} already exists")
            repo.branches[branch] = commit.oid
        return self._send_json({"success": True})

    def _delete_branch(self, repo_type: str, repo_id: str, branch: str) -> int:
        self._require_write()
        repo = self._get_repo(repo_type, repo_id)
        with self.hub._lock:
            if branch == DEFAULT_BRANCH:
                raise HubError(403, "the main branch cannot be deleted")
            if branch not in repo.branches:
                raise HubError(404, f"Branch {branch} does not exist", "RevisionNotFound")
            del repo.branches[branch]
        return self._send_json({"success": True})


@contextlib.contextmanager
def fake_hub(root: os.PathLike | str | None = None) -> Iterator[FakeHub]:
    """Run a :class:`FakeHub` for the duration of a ``with`` block.

    >>> with fake_hub() as hub:
    ...     hub.endpoint.startswith("http://127.0.0.1:")
    True
    """
    hub = FakeHub(root)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def repo_url(endpoint: str, repo_id: str, repo_type: str = "dataset") -> str:
    return f"{endpoint}/{URL_PREFIXES[repo_type]}{quote(repo_id)}"


try:
    import pytest
except ImportError:  # the server itself needs only the standard library
    pytest = None

if pytest is not None:

    @pytest.fixture
    def fake_hub_server(tmp_path) -> Iterator[FakeHub]:
        """A running :class:`FakeHub` for one test (storage under ``tmp_path``); fails the test
        at teardown if a client made a request the fake does not implement.

        Use it by importing it into a conftest or test module: ``from fake_hub import fake_hub_server``.
        """
        with fake_hub(tmp_path / "fake-hub") as hub:
            yield hub
            assert not hub.unknown_requests, f"requests the fake Hub does not implement: {hub.unknown_requests}"

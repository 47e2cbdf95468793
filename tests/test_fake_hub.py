"""The fake Hub itself: raw HTTP against its endpoints (no Hugging Face client), so that a gap or
a bug in the fake shows up here rather than as a puzzling client error elsewhere."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from fake_hub import INVALID_CREDENTIALS, FakeHub, fake_hub_server, git_blob_oid  # noqa: F401,F811 (fixture)

pytestmark = pytest.mark.integration


@pytest.fixture
def hub(tmp_path):
    with FakeHub(tmp_path / "hub") as hub:
        yield hub


def call(hub, method, path, body=None, *, token="default", headers=None, raw=False):
    """(status, headers, body) of one request; JSON bodies are encoded and decoded."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(hub.endpoint + path, data=data, method=method, headers=dict(headers or {}))
    if token:
        request.add_header("Authorization", f"Bearer {hub.token if token == 'default' else token}")
    try:
        with urllib.request.urlopen(request) as response:
            status, out_headers, out = response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        status, out_headers, out = e.code, e.headers, e.read()
    if not raw and out and out_headers.get("Content-Type", "").startswith("application/json"):
        out = json.loads(out)
    return status, out_headers, out


def commit(hub, repo, lines, branch="main", parent=None):
    header = {"summary": "test commit", "description": ""}
    if parent:
        header["parentCommit"] = parent
    body = b"".join(json.dumps(x).encode() + b"\n" for x in [{"key": "header", "value": header}, *lines])
    return call(hub, "POST", f"/api/datasets/{repo}/commit/{branch}", body, headers={"Content-Type": "application/x-ndjson"})


def regular(path, data: bytes):
    return {"key": "file", "value": {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64"}}


def create(hub, name="org/ds", **extra):
    ns, repo = name.split("/")
    status, _, body = call(hub, "POST", "/api/repos/create", {"name": repo, "organization": ns, "type": "dataset", **extra})
    assert status == 200, body
    return name


def test_repo_commit_resolve_and_tags(hub):
    repo = create(hub)
    assert call(hub, "POST", "/api/repos/create", {"name": "ds", "organization": "org", "type": "dataset"})[0] == 409
    status, _, info = call(hub, "GET", f"/api/datasets/{repo}")
    assert status == 200 and [s["rfilename"] for s in info["siblings"]] == [".gitattributes"]
    first = info["sha"]
    status, _, answer = commit(hub, repo, [regular("a/b.txt", b"hello")], parent=first)
    assert status == 200, answer
    second = answer["commitOid"]
    assert call(hub, "POST", f"/api/datasets/{repo}/tag/{second}", {"tag": "v1"})[0] == 200
    assert call(hub, "POST", f"/api/datasets/{repo}/tag/main", {"tag": "v1"})[0] == 409
    # a stale parent commit is refused, and leaves the branch where it was
    assert commit(hub, repo, [regular("c.txt", b"x")], parent=first)[0] == 412
    status, headers, data = call(hub, "GET", f"/datasets/{repo}/resolve/v1/a/b.txt", raw=True)
    assert (status, data) == (200, b"hello")
    assert headers["X-Repo-Commit"] == second and headers["ETag"] == f'"{git_blob_oid(b"hello")}"'
    status, headers, data = call(hub, "GET", f"/datasets/{repo}/resolve/main/a/b.txt", headers={"Range": "bytes=1-3"}, raw=True)
    assert (status, data, headers["Content-Range"]) == (206, b"ell", "bytes 1-3/5")
    status, headers, _ = call(hub, "GET", f"/datasets/{repo}/resolve/{first}/a/b.txt")
    assert status == 404 and headers["X-Error-Code"] == "EntryNotFound"
    assert call(hub, "GET", f"/datasets/{repo}/resolve/nope/a/b.txt")[1]["X-Error-Code"] == "RevisionNotFound"
    status, _, refs = call(hub, "GET", f"/api/datasets/{repo}/refs")
    assert refs["tags"] == [{"name": "v1", "ref": "refs/tags/v1", "targetCommit": second}]
    status, _, tree = call(hub, "GET", f"/api/datasets/{repo}/tree/main?recursive=true")
    assert [(e["type"], e["path"]) for e in tree] == [("directory", "a"), ("file", ".gitattributes"), ("file", "a/b.txt")]
    status, _, tree = call(hub, "GET", f"/api/datasets/{repo}/tree/main/a")
    assert [e["path"] for e in tree] == ["a/b.txt"]
    status, _, info = call(hub, "POST", f"/api/datasets/{repo}/paths-info/v1", b"paths=a%2Fb.txt&paths=a&paths=zz&expand=False",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert [(e["type"], e["path"]) for e in info] == [("file", "a/b.txt"), ("directory", "a")]
    status, _, commits = call(hub, "GET", f"/api/datasets/{repo}/commits/main")
    assert [c["id"] for c in commits] == [second, first]
    assert hub.unknown_requests == []


def test_lfs_upload_is_checked_and_committed(hub):
    repo = create(hub)
    data = b"\0parquet-bytes" * 100
    oid = hashlib.sha256(data).hexdigest()
    status, _, pre = call(hub, "POST", f"/api/datasets/{repo}/preupload/main",
                          {"files": [{"path": "d/x.parquet", "size": len(data), "sample": base64.b64encode(data[:512]).decode()},
                                     {"path": "notes.md", "size": 3, "sample": base64.b64encode(b"abc").decode()}]})  # fmt: skip
    assert [f["uploadMode"] for f in pre["files"]] == ["lfs", "regular"]
    # an LFS file must be uploaded before a commit may reference it
    lfs_line = {"key": "lfsFile", "value": {"path": "d/x.parquet", "algo": "sha256", "oid": oid, "size": len(data)}}
    assert commit(hub, repo, [lfs_line])[0] == 422
    status, _, batch = call(hub, "POST", f"/datasets/{repo}.git/info/lfs/objects/batch",
                            {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": len(data)}]})  # fmt: skip
    href = batch["objects"][0]["actions"]["upload"]["href"]
    path = urlsplit(href).path + "?" + urlsplit(href).query
    assert call(hub, "PUT", path, data[:-1], token=None)[0] == 400  # wrong bytes
    assert call(hub, "PUT", path.replace("sig=", "sig=0"), data, token=None)[0] == 403  # forged URL
    assert call(hub, "PUT", path, data, token=None)[0] == 200
    assert call(hub, "POST", "/__lfs/verify", {"oid": oid, "size": len(data)})[0] == 200
    status, _, batch = call(hub, "POST", f"/datasets/{repo}.git/info/lfs/objects/batch",
                            {"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]})  # fmt: skip
    assert "actions" not in batch["objects"][0]  # already there
    assert commit(hub, repo, [lfs_line])[0] == 200
    status, headers, body = call(hub, "GET", f"/datasets/{repo}/resolve/main/d/x.parquet", raw=True)
    assert body == data and headers["X-Linked-Etag"] == f'"{oid}"' and headers["X-Linked-Size"] == str(len(data))
    status, _, pre = call(hub, "POST", f"/api/datasets/{repo}/preupload/main",
                          {"files": [{"path": "d/x.parquet", "size": len(data), "sample": ""}]})  # fmt: skip
    assert pre["files"][0]["oid"] == oid  # lets the client skip unchanged files
    assert hub.read_file(repo, "d/x.parquet") == data


def test_auth_private_repos_and_rejected_tokens(hub):
    repo = create(hub, "org/secret", private=True)
    assert call(hub, "GET", f"/api/datasets/{repo}", token=None)[0] == 404
    assert call(hub, "GET", f"/api/datasets/{repo}")[0] == 200
    assert call(hub, "POST", "/api/repos/create", {"name": "x", "type": "dataset"}, token=None)[0] == 401
    assert call(hub, "POST", "/api/repos/create", {"name": "x", "type": "dataset"}, token=hub.read_token)[0] == 403
    status, headers, _ = call(hub, "GET", "/api/whoami-v2", token="hf_not_a_real_token_at_all")
    assert status == 401 and headers["X-Error-Message"] == INVALID_CREDENTIALS
    hub.reject_tokens = True
    assert call(hub, "GET", "/api/whoami-v2")[0] == 401
    hub.clear_faults()
    assert call(hub, "GET", "/api/whoami-v2")[2]["name"] == hub.user


def test_faults_last_as_long_as_asked(hub):
    repo = create(hub)
    hub.fail("commit", status=500, times=2)
    assert commit(hub, repo, [regular("a.txt", b"1")])[0] == 500
    assert commit(hub, repo, [regular("a.txt", b"1")])[0] == 500
    assert commit(hub, repo, [regular("a.txt", b"1")])[0] == 200
    hub.drop("commit")  # until cleared
    for _ in range(2):
        conn = http.client.HTTPConnection(*urlsplit(hub.endpoint).netloc.split(":"))
        body = b"x" * 10_000
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.request("POST", f"/api/datasets/{repo}/commit/main", body, {"Authorization": f"Bearer {hub.token}"})
            conn.getresponse()
        conn.close()
    hub.clear_faults()
    assert commit(hub, repo, [regular("b.txt", b"2")])[0] == 200
    assert hub.list_files(repo) == [".gitattributes", "a.txt", "b.txt"]
    assert [r.status for r in hub.operations("commit")] == [500, 500, 200, None, None, 200]
    with pytest.raises(ValueError, match="unknown operation"):
        hub.fail("comit")


def test_unknown_requests_are_recorded_loudly(hub, caplog):
    status, _, body = call(hub, "GET", "/api/datasets/org/ds/parquet")
    assert status == 501 and "no route" in body["error"]
    assert hub.unknown_requests == ["GET /api/datasets/org/ds/parquet"]
    assert "UNKNOWN REQUEST" in caplog.text


def test_request_log_never_holds_a_token(hub):
    create(hub)
    call(hub, "GET", "/api/whoami-v2")
    assert hub.requests and all(hub.token not in repr(r) for r in hub.requests)


def test_fixture_and_context_manager_give_a_running_hub(fake_hub_server):
    status, _, body = call(fake_hub_server, "GET", "/api/whoami-v2")
    assert status == 200 and body["name"] == fake_hub_server.user
    assert fake_hub_server.client_env("/x")["HF_ENDPOINT"] == fake_hub_server.endpoint
    assert "HF_TOKEN" not in fake_hub_server.client_env("/x", token=None)

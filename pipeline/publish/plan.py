"""Step 3 of a push: read the Hub (nothing is written) and plan the one commit and the tag."""

from __future__ import annotations

import collections
import fnmatch
import hashlib
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from pipeline.publish.changes import ReleaseRecord, card_with_release, diff_ids
from pipeline.publish.folder import CheckedFolder, LocalFile, _split_patterns
from pipeline.publish.hub import PublishError, check_ref_name, check_repo_id
from pipeline.publish.names import (
    AUTO_TAG_RE,
    CARD_FILENAME,
    CHANGES_FILE,
    DEFAULT_BRANCH,
    HUB_MANAGED_FILES,
    IMAGE_SHA256,
    REPO_TYPE,
    ROW_ID_KEY,
    human_size,
)

logger = logging.getLogger(__name__)

# --- 3. the plan ---------------------------------------------------------------------------


@dataclass
class PushPlan:
    """Everything a push will do; :meth:`describe` prints it for ``--dry-run``."""

    repo_id: str
    branch: str
    tag: str
    endpoint: str
    repo_exists: bool
    branch_exists: bool
    head_oid: Optional[str]  # head of the target branch (or of main for a new branch)
    previous_tag: Optional[str]
    record: ReleaseRecord
    files: list  # LocalFile to upload
    unchanged: list = field(default_factory=list)  # paths identical on the Hub
    deletions: list = field(default_factory=list)  # paths on the Hub no longer in the folder
    private: bool = False
    message: str = ""

    def _branch_state(self) -> str:
        if self.branch_exists:
            return "exists"
        if not self.repo_exists:
            return "the new repository's" if self.branch == DEFAULT_BRANCH else "will be created from main of the new repository"
        return "will be created from main"

    @property
    def upload_bytes(self) -> int:
        return sum(f.size for f in self.files if f.path_in_repo not in set(self.unchanged))

    def describe(self) -> str:
        unchanged = set(self.unchanged)
        lines = [
            f"push plan for {self.endpoint}/datasets/{self.repo_id}",
            f"  repository: {self.repo_id} ({'exists' if self.repo_exists else 'will be created' + (', private' if self.private else ', public')})",
            f"  branch:     {self.branch} ({self._branch_state()})",
            f"  tag:        {self.tag} (new)",
            f"  previous:   {self.previous_tag or 'none (first tagged revision)'}",
            f"  message:    {self.message}",
            f"  files ({len(self.files)}, {human_size(sum(f.size for f in self.files))}; {len(unchanged)} unchanged on the Hub):",
        ]
        for f in self.files:
            state = "unchanged" if f.path_in_repo in unchanged else "upload"
            lines.append(f"    {state:9s} {human_size(f.size):>10s}  {f.path_in_repo}")
        for path in self.deletions:
            lines.append(f"    {'delete':9s} {'':>10s}  {path}")
        lines.append(f"  changes against {self.previous_tag or 'nothing (first revision)'}:")
        for name, c in self.record.changes.items():
            if c.status == "first":
                lines.append(f"    {name}: {c.rows} rows (first revision)")
            elif c.status == "unknown":
                lines.append(f"    {name}: {c.rows} rows; not comparable with {self.previous_tag} (no common id column)")
            else:
                lines.append(f"    {name}: {c.rows} rows, {c.images_added} images added, {c.images_removed} removed ({c.status}, by {c.compared_by})")
        return "\n".join(lines)




def next_auto_tag(tags: Iterable[str]) -> str:
    """``v<N+1>`` for the highest existing ``v<N>`` tag (``v1`` when there is none).

    >>> next_auto_tag(["v1", "v3", "rebuild"])
    'v4'
    """
    numbers = [int(m.group(1)) for t in tags if (m := AUTO_TAG_RE.match(t))]
    return f"v{max(numbers, default=0) + 1}"


def _previous_tag(api, repo_id: str, revision: str, tags_by_commit: Mapping[str, list], token) -> tuple:
    """(tag, commit oid) of the most recent tagged commit in the history of ``revision``."""
    if not tags_by_commit:
        return None, None
    for commit in api.list_repo_commits(repo_id, repo_type=REPO_TYPE, revision=revision, token=token):
        names = tags_by_commit.get(commit.commit_id)
        if names:
            return sorted(names)[-1], commit.commit_id
    return None, None


def _previous_ids(api, repo_id: str, oid: str, token, download_dir: Path, row_id: Optional[str] = None) -> dict:
    """``{config: (id_key, Counter)}`` of the revision at commit ``oid`` (from its Parquet files)."""
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard
    from huggingface_hub.errors import EntryNotFoundError

    try:
        readme = api.hf_hub_download(repo_id, CARD_FILENAME, repo_type=REPO_TYPE, revision=oid, token=token, cache_dir=download_dir)
    except EntryNotFoundError:
        return {}
    card_data = DatasetCard.load(readme).data
    configs = MetadataConfigs.from_dataset_card_data(card_data)
    row_id = card_data.get(ROW_ID_KEY) or row_id  # the previous release's own, else this folder's
    remote_files = api.list_repo_files(repo_id, repo_type=REPO_TYPE, revision=oid, token=token)
    result = {}
    for name, entry in configs.items():
        patterns = [p.lstrip("./") for ps in _split_patterns(entry).values() for p in ps]
        paths = sorted({f for f in remote_files for p in patterns if fnmatch.fnmatch(f, p) or fnmatch.fnmatch(f, p.replace("/**", "/*"))})
        if not paths or not all(p.endswith(".parquet") for p in paths):
            result[name] = (None, None)
            continue
        local = [api.hf_hub_download(repo_id, p, repo_type=REPO_TYPE, revision=oid, token=token, cache_dir=download_dir) for p in paths]
        result[name] = _parquet_ids(local, row_id)
    return result


def _parquet_ids(paths: Sequence[str], row_id: Optional[str]) -> tuple:
    import pyarrow.parquet as pq

    schema = pq.read_schema(paths[0])
    names = schema.names
    key = row_id if row_id in names else None
    ids = collections.Counter()
    if key is not None:
        for p in paths:
            ids.update(str(v) for v in pq.read_table(p, columns=[key]).column(key).to_pylist())
        return key, ids
    image_column = _parquet_image_column(schema)
    if image_column is None:
        return None, None
    for p in paths:
        column = pq.read_table(p, columns=[image_column]).column(image_column).combine_chunks()
        for data in column.field("bytes").to_pylist():
            if data is None:
                return None, None
            ids[hashlib.sha256(data).hexdigest()] += 1
    return IMAGE_SHA256, ids


def _parquet_image_column(schema) -> Optional[str]:
    """The first column the ``datasets`` metadata of a Parquet file declares as an Image."""
    metadata = schema.metadata or {}
    raw = metadata.get(b"huggingface")
    if raw:
        features = json.loads(raw).get("info", {}).get("features", {})
        for name, feature in features.items():
            if isinstance(feature, dict) and feature.get("_type") == "Image":
                return name
    return None


def plan_push(
    api,
    checked: CheckedFolder,
    repo_id: str,
    *,
    tag: Optional[str] = None,
    branch: str = DEFAULT_BRANCH,
    private: bool = False,
    message: Optional[str] = None,
    token=None,
) -> PushPlan:
    """Read the Hub and decide what a push of ``checked`` to ``repo_id`` does. Writes nothing."""
    check_repo_id(repo_id)
    check_ref_name(branch, "branch")
    if tag is not None:
        check_ref_name(tag, "tag")
    state = _remote_state(api, repo_id, branch, tag, token)
    tag = tag or next_auto_tag(state.tags)
    record = ReleaseRecord(tag, state.previous_tag, _config_changes(api, repo_id, checked, state.previous_oid, token))
    files = [f for f in checked.files if f.path_in_repo not in (CARD_FILENAME, CHANGES_FILE)]
    files.append(LocalFile.from_bytes(CARD_FILENAME, card_with_release(checked.card_text, record, repo_id).encode("utf-8")))
    files.append(LocalFile.from_bytes(CHANGES_FILE, record.changes_json()))
    files.sort(key=lambda f: f.path_in_repo)
    remote = state.remote
    unchanged = [f.path_in_repo for f in files if remote.get(f.path_in_repo) in (f.sha256, _git_oid(f))]
    local_paths = {f.path_in_repo for f in files}
    deletions = sorted(p for p in remote if p not in local_paths and p not in HUB_MANAGED_FILES)
    return PushPlan(
        repo_id=repo_id,
        branch=branch,
        tag=tag,
        endpoint=api.endpoint,
        repo_exists=state.repo_exists,
        branch_exists=state.branch_exists,
        head_oid=state.head_oid,
        previous_tag=state.previous_tag,
        record=record,
        files=files,
        unchanged=unchanged,
        deletions=deletions,
        private=private,
        message=message or f"Publish revision {tag}",
    )


@dataclass
class _RemoteState:
    """What the Hub has now: the repo, the target branch's head, tags, the previous release, files."""

    repo_exists: bool = False
    branch_exists: bool = False
    head_oid: Optional[str] = None
    previous_tag: Optional[str] = None
    previous_oid: Optional[str] = None
    tags: dict = field(default_factory=dict)
    remote: dict = field(default_factory=dict)  # path -> sha256 (LFS) or git blob id


def _remote_state(api, repo_id: str, branch: str, tag: Optional[str], token) -> _RemoteState:
    from huggingface_hub.errors import RepositoryNotFoundError

    state = _RemoteState()
    try:
        api.repo_info(repo_id, repo_type=REPO_TYPE, token=token)
    except RepositoryNotFoundError:
        return state
    state.repo_exists = True
    refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE, token=token)
    state.tags = {t.name: t.target_commit for t in refs.tags}
    branches = {b.name: b.target_commit for b in refs.branches}
    state.branch_exists = branch in branches
    state.head_oid = branches.get(branch if state.branch_exists else DEFAULT_BRANCH)
    if tag is not None and tag in state.tags:
        raise PublishError(
            f"tag {tag!r} already exists on {repo_id} (commit {state.tags[tag][:12]}): a published revision "
            "is never overwritten; choose another --tag (or leave it out to use the next vN)"
        )
    tags_by_commit: dict = collections.defaultdict(list)
    for name, oid in state.tags.items():
        tags_by_commit[oid].append(name)
    if state.head_oid is not None:
        state.previous_tag, state.previous_oid = _previous_tag(api, repo_id, state.head_oid, tags_by_commit, token)
        for entry in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=state.head_oid, recursive=True, token=token):
            if getattr(entry, "size", None) is not None and hasattr(entry, "blob_id"):
                state.remote[entry.path] = entry.lfs.sha256 if entry.lfs else entry.blob_id
    return state


def _config_changes(api, repo_id: str, checked: CheckedFolder, previous_oid: Optional[str], token) -> dict:
    """Each config's change against the previous release (configs gone since then last)."""
    old: dict = {}
    if previous_oid is not None:
        download_dir = Path(tempfile.mkdtemp(prefix="push-previous-"))
        try:
            old = _previous_ids(api, repo_id, previous_oid, token, download_dir, checked.row_id)
        finally:
            shutil.rmtree(download_dir, ignore_errors=True)
    changes = {}
    for name, summary in checked.configs.items():
        old_key, old_ids = old.get(name, (None, None))
        changes[name] = diff_ids(name, summary, old_key, old_ids if name in old else None, first=previous_oid is None)
    for name, (old_key, old_ids) in old.items():
        if name not in checked.configs:
            changes[name] = diff_ids(name, None, old_key, old_ids, first=False)
    return changes


def _git_oid(f: LocalFile) -> Optional[str]:
    if f.size > 10 * 1024 * 1024:
        return None
    data = f.source if isinstance(f.source, bytes) else Path(f.source).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

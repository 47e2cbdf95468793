"""Publish the ``clopper_pearson_accuracy`` metric folder as a Gradio Space on the Hub.

``evaluate.load("ORG/NAME")`` downloads exactly one file from the Space,
``/spaces/ORG/NAME/resolve/<revision>/NAME.py``, and imports it; so the script must be in the
Space under the repository's own name. When ``NAME`` is not ``clopper_pearson_accuracy`` the
script is uploaded under both names (``app.py`` imports it by its own name). The folder's
``README.md`` is the metric card and the Space's configuration (``sdk: gradio``, ``app_file``).
Like a dataset push, everything goes in one commit, deletions of files no longer in the folder
included, optionally tagged.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pipeline.publish.folder import LocalFile
from pipeline.publish.hub import PublishError, check_ref_name, check_repo_id
from pipeline.publish.names import HUB_MANAGED_FILES, human_size

logger = logging.getLogger(__name__)

REPO_TYPE = "space"
SPACE_SDK = "gradio"
METRIC_PACKAGE = "metrics.clopper_pearson_accuracy"
METRIC_NAME = "clopper_pearson_accuracy"
REQUIRED_FILES = (f"{METRIC_NAME}.py", "README.md", "app.py", "requirements.txt")


class MetricFolderError(PublishError, ValueError):
    """The metric folder cannot be published as it is."""


def metric_folder() -> Path:
    """The folder of the installed ``metrics.clopper_pearson_accuracy`` package (or of the checkout).

    >>> (metric_folder() / "clopper_pearson_accuracy.py").is_file()
    True
    """
    try:
        spec = importlib.util.find_spec(METRIC_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / f"{METRIC_NAME}.py").is_file():
            return Path(location)
    candidate = Path(__file__).resolve().parent.parent / "metrics" / METRIC_NAME
    if (candidate / f"{METRIC_NAME}.py").is_file():
        return candidate
    raise MetricFolderError(
        f"cannot find the metric folder: neither the package {METRIC_PACKAGE} nor {candidate} holds "
        f"{METRIC_NAME}.py; install the project (pip install -e .) or pass --folder"
    )


def _space_metadata(readme: Path) -> dict:
    from huggingface_hub import RepoCard

    return RepoCard.load(readme).data.to_dict()


def check_metric_folder(folder) -> list:
    """The files to upload from a metric folder; refuses a folder that is not a Gradio Space.

    >>> files = check_metric_folder(metric_folder())
    >>> sorted(f.path_in_repo for f in files)[:2]
    ['README.md', 'app.py']
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MetricFolderError(f"{folder} is not a folder: give the metric folder (metrics/{METRIC_NAME})")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise MetricFolderError(f"{folder} lacks {', '.join(missing)}: a metric Space needs {', '.join(REQUIRED_FILES)}")
    metadata = _space_metadata(folder / "README.md")
    if metadata.get("sdk") != SPACE_SDK:
        raise MetricFolderError(
            f"{folder / 'README.md'} says sdk: {metadata.get('sdk')!r}; a metric Space needs `sdk: {SPACE_SDK}` in its YAML"
        )
    app_file = metadata.get("app_file", "app.py")
    if not (folder / app_file).is_file():
        raise MetricFolderError(f"{folder / 'README.md'} names app_file {app_file!r}, which is not in {folder}")
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        parts = rel.split("/")
        if any(p.startswith(".") or p == "__pycache__" for p in parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        if rel == "__init__.py":
            continue  # makes the folder a Python package here; meaningless in a Space
        files.append(LocalFile.from_path(rel, path))
    return files


@dataclass
class MetricPlan:
    repo_id: str
    tag: Optional[str]
    endpoint: str
    repo_exists: bool
    files: list
    deletions: list = field(default_factory=list)
    private: bool = False
    message: str = ""

    def describe(self) -> str:
        lines = [
            f"push-metric plan for {self.endpoint}/spaces/{self.repo_id}",
            f"  Space:   {self.repo_id} ({'exists' if self.repo_exists else 'will be created, sdk gradio'})",
            f"  tag:     {self.tag or '(none)'}",
            f"  message: {self.message}",
            f"  files ({len(self.files)}):",
        ]
        lines += [f"    upload {human_size(f.size):>10s}  {f.path_in_repo}" for f in self.files]
        lines += [f"    delete {'':>10s}  {p}" for p in self.deletions]
        name = self.repo_id.split("/")[1]
        lines.append(f'  then: evaluate.load("{self.repo_id}") loads {name}.py from the Space')
        return "\n".join(lines)


def plan_metric_push(api, folder, repo_id: str, *, tag: Optional[str] = None, private: bool = False, message: Optional[str] = None, token=None) -> MetricPlan:
    """Read the Hub and decide what publishing the metric folder does. Writes nothing."""
    from huggingface_hub.errors import RepositoryNotFoundError

    check_repo_id(repo_id)
    if tag is not None:
        check_ref_name(tag, "tag")
    files = check_metric_folder(folder)
    name = repo_id.split("/")[1]
    if name != METRIC_NAME:
        script = next(f for f in files if f.path_in_repo == f"{METRIC_NAME}.py")
        if any(f.path_in_repo == f"{name}.py" for f in files):
            raise MetricFolderError(f"the folder already has {name}.py; name the Space {METRIC_NAME} or remove that file")
        files.append(LocalFile(f"{name}.py", script.source, script.size, script.sha256))
        files.sort(key=lambda f: f.path_in_repo)
    remote = []
    try:
        info = api.repo_info(repo_id, repo_type=REPO_TYPE, token=token)
        repo_exists = True
        remote = [s.rfilename for s in info.siblings or []]
        if tag is not None:
            tags = {t.name for t in api.list_repo_refs(repo_id, repo_type=REPO_TYPE, token=token).tags}
            if tag in tags:
                raise PublishError(f"tag {tag!r} already exists on the Space {repo_id}; choose another --tag")
    except RepositoryNotFoundError:
        repo_exists = False
    local = {f.path_in_repo for f in files}
    deletions = sorted(p for p in remote if p not in local and p not in HUB_MANAGED_FILES)
    return MetricPlan(
        repo_id, tag, api.endpoint, repo_exists, files, deletions, private,
        message or (f"Publish the metric ({tag})" if tag else "Publish the metric"),
    )  # fmt: skip


@dataclass(frozen=True)
class MetricPushResult:
    repo_id: str
    commit_oid: str
    tag: Optional[str]
    url: str


def execute_metric_push(api, plan: MetricPlan, *, token=None) -> MetricPushResult:
    """Create the Space if needed, commit every file at once, and tag the commit if asked."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    from pipeline.publish.push import PushFailed

    stage = "creating the Space"
    try:
        if not plan.repo_exists:
            api.create_repo(plan.repo_id, repo_type=REPO_TYPE, space_sdk=SPACE_SDK, private=plan.private, exist_ok=True, token=token)
        operations = [CommitOperationAdd(f.path_in_repo, str(f.source)) for f in plan.files]
        operations += [CommitOperationDelete(p) for p in plan.deletions]
        stage = f"uploading {len(plan.files)} files to the Space"
        commit = api.create_commit(plan.repo_id, operations, commit_message=plan.message, repo_type=REPO_TYPE, token=token)
    except Exception as e:
        raise PushFailed(stage, e) from e
    if plan.tag is not None:
        try:
            api.create_tag(plan.repo_id, repo_type=REPO_TYPE, tag=plan.tag, revision=commit.oid, tag_message=plan.message, token=token)
        except Exception as e:
            raise PushFailed(f"tagging commit {commit.oid[:12]} as {plan.tag}", e, committed=commit.oid) from e
    return MetricPushResult(plan.repo_id, commit.oid, plan.tag, f"{plan.endpoint}/spaces/{plan.repo_id}")

"""Publish a Hub-ready dataset folder as a new, tagged revision of a Hub dataset repository.

A push has three steps, each a function you can call on its own:

1. :func:`check_folder` -- the folder loads with ``datasets``, every config of the card has
   data, and its row counts and features are what the card's ``dataset_info`` says;
2. :func:`plan_push` -- read the Hub (nothing is written): the target repo, branch and tag,
   the previous tag, the files to upload and delete, and what changed against the previous tag;
3. :func:`execute_push` -- create the repo if needed, upload everything in **one commit**
   (additions plus deletions of files no longer in the folder, so the branch moves from the
   previous revision to the new one at once, or not at all), then tag that exact commit.

The card that is uploaded records the revision (the user's folder is never modified: the new
``README.md`` and ``revisions/changes.json`` are uploaded from memory, the data files straight
from the folder). In the card's YAML::

    revision:
      name: v2                      # the tag
      previous: v1                  # the previous tag of the branch, or null
      configs:
        matched-frequency:
          revision_file: imagenetv2-b-33.json   # from revisions/<config>.json, if present
          rows: 10000
          compared_by: candidate_id
          images_added: 12
          images_removed: 12

plus a prose section, and ``revisions/changes.json`` lists the ids added and removed per config.

Images are identified by ``candidate_id`` (ImageNetV2), else ``ti_index`` (CIFAR-10.1's Tiny
Images index), else by the sha256 of the image bytes. The *previous tag* is the most recent
tagged commit in the history of the target branch (of ``main`` for a new branch).
"""

from __future__ import annotations

import collections
import fnmatch
import hashlib
import json
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from pipeline.publish.hub import PublishError, check_ref_name, check_repo_id

logger = logging.getLogger(__name__)

REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"
CARD_FILENAME = "README.md"
CHANGES_FILE = "revisions/changes.json"
ID_COLUMNS = ("candidate_id", "ti_index")
IMAGE_SHA256 = "sha256(image)"
HUB_MANAGED_FILES = frozenset({".gitattributes"})  # kept on the Hub, never deleted by a push
SECTION_START = "<!-- revision:start -->"
SECTION_END = "<!-- revision:end -->"
AUTO_TAG_RE = re.compile(r"^v(\d+)$")


class FolderError(PublishError, ValueError):
    """The folder is not a publishable Hub-ready dataset folder; the message lists every problem."""


# --- 1. the folder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalFile:
    """A file to upload: its path in the repo and where it comes from (a path, or bytes)."""

    path_in_repo: str
    source: object  # pathlib.Path or bytes
    size: int
    sha256: str

    @classmethod
    def from_path(cls, path_in_repo: str, path: Path) -> "LocalFile":
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return cls(path_in_repo, path, path.stat().st_size, digest.hexdigest())

    @classmethod
    def from_bytes(cls, path_in_repo: str, data: bytes) -> "LocalFile":
        return cls(path_in_repo, data, len(data), hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class ConfigSummary:
    """One config of a checked folder: its rows per split, features, and row ids."""

    name: str
    rows: dict  # split -> number of rows
    features: object  # datasets.Features
    id_key: Optional[str]  # column name, IMAGE_SHA256, or None
    ids: collections.Counter  # ids of all rows (all splits), under id_key
    revision_file: Optional[str]

    @property
    def num_rows(self) -> int:
        return sum(self.rows.values())


@dataclass(frozen=True)
class CheckedFolder:
    folder: Path
    card_text: str
    configs: dict  # name -> ConfigSummary, in card order
    files: list  # LocalFile, sorted by path

    @property
    def config_names(self) -> list:
        return list(self.configs)


def _split_patterns(entry: Mapping) -> dict:
    """``{split: [pattern, ...]}`` of a ``configs:`` entry (``None`` split: datasets infers it)."""
    data_files = entry.get("data_files")
    if data_files is None:
        data_dir = entry.get("data_dir")
        return {None: [f"{data_dir.strip('/')}/**"]} if data_dir else {}
    if isinstance(data_files, str):
        return {None: [data_files]}
    patterns: dict = {}
    for item in data_files:
        if isinstance(item, str):
            patterns.setdefault(None, []).append(item)
        else:
            paths = item["path"] if isinstance(item["path"], list) else [item["path"]]
            patterns.setdefault(item["split"], []).extend(paths)
    return patterns


def _matching_files(folder: Path, pattern: str) -> list:
    pattern = pattern.lstrip("./")
    return sorted(p for p in folder.glob(pattern) if p.is_file())


def _folder_files(folder: Path) -> tuple:
    """Files to upload (relative paths), and problems (symbolic links, hidden files are skipped)."""
    files, problems = [], []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        parts = rel.split("/")
        if any(part.startswith(".") for part in parts) and rel != ".gitattributes":
            continue  # .git/, .cache/, editor files: not part of the dataset
        if "__pycache__" in parts:
            continue
        if path.is_symlink():
            problems.append(f"{rel} is a symbolic link; replace it by the file itself (links are not uploaded)")
        elif path.is_file():
            files.append(rel)
    return files, problems


def read_revision_file_name(folder: Path, config: str) -> Optional[str]:
    """The name of the revision a config was built from, from ``revisions/<config>.json``.

    Its ``output_filename`` (the original pipeline's name, e.g. ``imagenetv2-b-33.json``), else
    its ``name``, else the file's own name; None if there is no such file.
    """
    path = folder / "revisions" / f"{config}.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise FolderError(f"{path} is not valid JSON ({e}); fix or remove it") from None
    if isinstance(data, dict):
        for key in ("output_filename", "name"):
            if isinstance(data.get(key), str) and data[key]:
                return data[key]
    return path.name


def id_key_of(features) -> Optional[str]:
    """How rows of a config are identified: an id column, the image bytes' sha256, or None."""
    import datasets

    for column in ID_COLUMNS:
        if column in features:
            return column
    if any(isinstance(f, datasets.Image) for f in features.values()):
        return IMAGE_SHA256
    return None


def _image_column(features) -> Optional[str]:
    import datasets

    return next((name for name, f in features.items() if isinstance(f, datasets.Image)), None)


def _dataset_ids(dataset, key: Optional[str]) -> collections.Counter:
    import datasets

    if key is None:
        return collections.Counter()
    if key != IMAGE_SHA256:
        return collections.Counter(str(v) for v in dataset.data.column(key).to_pylist())
    column = _image_column(dataset.features)
    undecoded = dataset.select_columns([column]).cast_column(column, datasets.Image(decode=False))
    ids = collections.Counter()
    for row in undecoded:
        data = row[column]["bytes"]
        if data is None and row[column].get("path"):
            data = Path(row[column]["path"]).read_bytes()
        ids[hashlib.sha256(data).hexdigest()] += 1
    return ids


def check_folder(folder, *, cache_dir: Optional[str] = None) -> CheckedFolder:
    """Check that ``folder`` is a publishable Hub-ready dataset folder and summarise it.

    Refuses (:class:`FolderError`, listing every problem found) when the folder or its card is
    missing, the card has no ``configs`` or no ``dataset_info``, a config has no data files or
    does not load with ``datasets``, or its splits, row counts or features differ from the card.

    >>> import tempfile, pathlib, datasets
    >>> from pipeline.core.export import ConfigExport, write_hub_folder
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "toy"
    >>> ds = datasets.Dataset.from_dict({"candidate_id": ["a", "b"]})
    >>> _ = write_hub_folder(out, [ConfigExport("c", ds, default=True)], "# Toy", {"license": "mit"})
    >>> checked = check_folder(out)
    >>> checked.configs["c"].num_rows, checked.configs["c"].id_key
    (2, 'candidate_id')
    """
    import datasets
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    folder = Path(folder)
    if not folder.is_dir():
        raise FolderError(f"{folder} is not a folder: give the Hub-ready folder written by `python -m <dataset> build`")
    card_path = folder / CARD_FILENAME
    if not card_path.is_file():
        raise FolderError(f"{folder} has no {CARD_FILENAME}: it is not a Hub-ready dataset folder (build it with `python -m <dataset> build`)")
    card_text = card_path.read_text(encoding="utf-8")
    try:
        card = DatasetCard(card_text)
        metadata_configs = MetadataConfigs.from_dataset_card_data(card.data)
        infos = DatasetInfosDict.from_dataset_card_data(card.data)
    except Exception as e:
        raise FolderError(f"the card {card_path} has invalid YAML metadata: {e}") from None
    problems = []
    if not metadata_configs:
        problems.append(f"the card {card_path} declares no `configs:` (each config with its data_files)")
    if not card.data.get("dataset_info"):
        problems.append(f"the card {card_path} has no `dataset_info:` (features and row counts per config)")
    for name in infos:
        if metadata_configs and name not in metadata_configs:
            problems.append(f"config {name!r} is in the card's dataset_info but not in its configs")
    files, file_problems = _folder_files(folder)
    problems += file_problems
    if problems:
        raise FolderError(_problem_list(folder, problems))

    summaries = {}
    own_cache = cache_dir is None
    cache = Path(cache_dir) if cache_dir else Path(tempfile.mkdtemp(prefix="push-check-"))
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        for name, entry in metadata_configs.items():
            summary, config_problems = _check_config(folder, name, entry, infos.get(name), cache)
            problems += config_problems
            if summary is not None:
                summaries[name] = summary
    finally:
        if bars:
            datasets.enable_progress_bars()
        if own_cache:
            shutil.rmtree(cache, ignore_errors=True)
    if problems:
        raise FolderError(_problem_list(folder, problems))
    local_files = [LocalFile.from_path(rel, folder / rel) for rel in files]
    return CheckedFolder(folder, card_text, summaries, local_files)


def _problem_list(folder: Path, problems: Sequence[str]) -> str:
    lines = "\n".join(f"  - {p}" for p in problems)
    return f"refusing to push {folder}: it is not a consistent Hub-ready dataset folder:\n{lines}\nRebuild the folder (`python -m <dataset> build`) or fix the card, then push again."


def _check_config(folder: Path, name: str, entry: Mapping, info, cache: Path):
    import datasets

    problems = []
    patterns = _split_patterns(entry)
    if not patterns:
        return None, [f"config {name!r} has no data_files (or data_dir) in the card"]
    for split, split_patterns in patterns.items():
        for pattern in split_patterns:
            if not _matching_files(folder, pattern):
                where = f"split {split!r} of config {name!r}" if split else f"config {name!r}"
                problems.append(f"{where} has no data: no file in the folder matches {pattern!r}")
    if info is None:
        problems.append(f"config {name!r} has no entry in the card's dataset_info (features, splits, num_examples)")
    if problems:
        return None, problems
    # datasets casts what it loads to the card's features, so compare the files' own features first
    for path in sorted({p for ps in patterns.values() for pattern in ps for p in _matching_files(folder, pattern)}):
        rel = path.relative_to(folder).as_posix()
        try:
            file_features = _parquet_features(path)
        except Exception as e:
            problems.append(f"{rel} (config {name!r}) is not a readable Parquet file: {type(e).__name__}: {e}")
            continue
        if file_features is not None and info.features is not None and file_features != info.features:
            problems.append(
                f"{rel} (config {name!r}) has features that differ from the card's dataset_info: "
                f"{_feature_difference(file_features, info.features)}"
            )
    if problems:
        return None, problems
    try:
        # no_checks: compare rows and features with the card below, with a message that says so
        loaded = datasets.load_dataset(str(folder), name, cache_dir=str(cache), verification_mode="no_checks")
    except Exception as e:
        return None, [f"config {name!r} does not load with datasets.load_dataset: {type(e).__name__}: {e}"]
    rows = {split: ds.num_rows for split, ds in loaded.items()}
    expected_rows = {split: s.num_examples for split, s in (info.splits or {}).items()}
    if rows != expected_rows:
        problems.append(f"config {name!r} has rows {rows} but the card's dataset_info says {expected_rows}")
    for split, ds in loaded.items():
        if info.features is not None and ds.features != info.features:
            problems.append(
                f"config {name!r} split {split!r} has features that differ from the card's dataset_info: "
                f"{_feature_difference(ds.features, info.features)}"
            )
            break
    if info.features is None:
        problems.append(f"config {name!r} has no features in the card's dataset_info")
    if problems:
        return None, problems
    features = next(iter(loaded.values())).features
    key = id_key_of(features)
    ids = collections.Counter()
    for ds in loaded.values():
        ids += _dataset_ids(ds, key)
    revision_file = read_revision_file_name(folder, name)
    return ConfigSummary(name, rows, features, key, ids, revision_file), []


def _parquet_features(path: Path):
    """The ``datasets`` features a Parquet file declares in its metadata (None if not Parquet or none)."""
    import datasets
    import pyarrow.parquet as pq

    if path.suffix != ".parquet":
        return None
    schema = pq.read_schema(path)
    if not (schema.metadata or {}).get(b"huggingface"):
        return None
    return datasets.Features.from_arrow_schema(schema)


def _feature_difference(actual, expected) -> str:
    differences = []
    for column in list(expected) + [c for c in actual if c not in expected]:
        if column not in actual:
            differences.append(f"column {column!r} missing from the data")
        elif column not in expected:
            differences.append(f"column {column!r} not in the card")
        elif actual[column] != expected[column]:
            differences.append(f"column {column!r} is {actual[column]!r} in the data but {expected[column]!r} in the card")
    return "; ".join(differences) or "column order differs"


# --- 2. what changed -------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigChange:
    """What changed in one config against the previous tag."""

    config: str
    rows: int
    compared_by: Optional[str]
    added: Optional[list]  # ids; None when unknown
    removed: Optional[list]
    status: str = "changed"  # "new" (not in the previous tag), "removed", "changed", "unchanged", "first", "unknown"
    revision_file: Optional[str] = None

    @property
    def images_added(self) -> Optional[int]:
        return None if self.added is None else len(self.added)

    @property
    def images_removed(self) -> Optional[int]:
        return None if self.removed is None else len(self.removed)


def _counter_list(counter: collections.Counter) -> list:
    return sorted(counter.elements())


def diff_ids(config: str, new: Optional[ConfigSummary], old_key: Optional[str], old_ids: Optional[collections.Counter], *, first: bool) -> ConfigChange:
    """Compare a config's rows with the previous tag's (``old_ids`` None: the config was not there)."""
    if new is None:
        removed = _counter_list(old_ids) if old_ids is not None else None
        return ConfigChange(config, 0, old_key, [], removed, "removed")
    if first:
        return ConfigChange(config, new.num_rows, new.id_key, None, None, "first", new.revision_file)
    if old_ids is None:
        return ConfigChange(config, new.num_rows, new.id_key, _counter_list(new.ids), [], "new", new.revision_file)
    if new.id_key is None or old_key != new.id_key:
        return ConfigChange(config, new.num_rows, None, None, None, "unknown", new.revision_file)
    added, removed = new.ids - old_ids, old_ids - new.ids
    status = "changed" if added or removed else "unchanged"
    return ConfigChange(config, new.num_rows, new.id_key, _counter_list(added), _counter_list(removed), status, new.revision_file)


@dataclass(frozen=True)
class RevisionRecord:
    """The revision a push publishes: its tag, the previous tag, and the changes per config."""

    name: str
    previous: Optional[str]
    changes: dict  # config -> ConfigChange, in card order (removed configs last)

    def yaml_block(self) -> dict:
        configs = {}
        for name, c in self.changes.items():
            entry = {"revision_file": c.revision_file, "rows": c.rows, "compared_by": c.compared_by}
            if c.status in ("new", "removed", "unknown", "first"):
                entry["status"] = c.status
            entry["images_added"] = c.images_added
            entry["images_removed"] = c.images_removed
            configs[name] = entry
        return {"name": self.name, "previous": self.previous, "configs": configs}

    def changes_json(self) -> bytes:
        payload = {
            "revision": self.name,
            "previous": self.previous,
            "id_columns": f"{', '.join(ID_COLUMNS)}, else {IMAGE_SHA256}",
            "configs": {
                name: {
                    "status": c.status,
                    "compared_by": c.compared_by,
                    "revision_file": c.revision_file,
                    "rows": c.rows,
                    "added": c.added,
                    "removed": c.removed,
                }
                for name, c in self.changes.items()
            },
        }
        return (json.dumps(payload, indent=2) + "\n").encode()

    def prose(self, repo_id: str) -> str:
        example_config = next((n for n, c in self.changes.items() if c.status != "removed"), None)
        lines = [SECTION_START, f"## Revision `{self.name}`", ""]
        load = f'load_dataset("{repo_id}", "{example_config}", revision="{self.name}")' if example_config else ""
        lines.append(f"This is revision `{self.name}` of the dataset, published as the Hub tag `{self.name}`" + (f": `{load}`." if load else "."))
        if self.previous:
            keys = sorted({c.compared_by for c in self.changes.values() if c.compared_by})
            by = ", ".join(IMAGE_SHA256 if k == IMAGE_SHA256 else f"`{k}`" for k in keys) or "nothing comparable"
            lines.append(f"Changes against the previous tag `{self.previous}` (images identified by {by}):")
        else:
            lines.append("It is the first tagged revision of this repository.")
        lines += ["", "| config | revision file | rows | images added | images removed |", "|---|---|---:|---:|---:|"]
        for name, c in self.changes.items():
            added = "—" if c.images_added is None else str(c.images_added)
            removed = "—" if c.images_removed is None else str(c.images_removed)
            note = {"new": " (new config)", "removed": " (config removed)", "unknown": " (not comparable)"}.get(c.status, "")
            lines.append(f"| {name}{note} | {c.revision_file or '—'} | {c.rows} | {added} | {removed} |")
        lines += ["", f"The ids of the images added and removed are listed in `{CHANGES_FILE}`.", SECTION_END]
        return "\n".join(lines)


def card_with_revision(card_text: str, record: RevisionRecord, repo_id: str) -> str:
    """The card with the ``revision:`` YAML block and the revision section (replacing old ones)."""
    from huggingface_hub import DatasetCard

    from pipeline.core.export import render_card

    card = DatasetCard(card_text)
    card.data["revision"] = record.yaml_block()
    body = card.text
    start, end = body.find(SECTION_START), body.find(SECTION_END)
    if start >= 0 and end > start:
        body = body[:start].rstrip() + "\n\n" + body[end + len(SECTION_END) :].lstrip()
    body = body.rstrip() + "\n\n" + record.prose(repo_id) + "\n"
    return render_card(card.data, body)


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
    record: RevisionRecord
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
            f"  files ({len(self.files)}, {_human(sum(f.size for f in self.files))}; {len(unchanged)} unchanged on the Hub):",
        ]
        for f in self.files:
            state = "unchanged" if f.path_in_repo in unchanged else "upload"
            lines.append(f"    {state:9s} {_human(f.size):>10s}  {f.path_in_repo}")
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


def _human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size} B"


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


def _previous_ids(api, repo_id: str, oid: str, token, download_dir: Path) -> dict:
    """``{config: (id_key, Counter)}`` of the revision at commit ``oid`` (from its Parquet files)."""
    from huggingface_hub import DatasetCard
    from huggingface_hub.errors import EntryNotFoundError
    from datasets.utils.metadata import MetadataConfigs

    try:
        readme = api.hf_hub_download(repo_id, CARD_FILENAME, repo_type=REPO_TYPE, revision=oid, token=token, cache_dir=download_dir)
    except EntryNotFoundError:
        return {}
    configs = MetadataConfigs.from_dataset_card_data(DatasetCard.load(readme).data)
    remote_files = api.list_repo_files(repo_id, repo_type=REPO_TYPE, revision=oid, token=token)
    result = {}
    for name, entry in configs.items():
        patterns = [p.lstrip("./") for ps in _split_patterns(entry).values() for p in ps]
        paths = sorted({f for f in remote_files for p in patterns if fnmatch.fnmatch(f, p) or fnmatch.fnmatch(f, p.replace("/**", "/*"))})
        if not paths or not all(p.endswith(".parquet") for p in paths):
            result[name] = (None, None)
            continue
        local = [api.hf_hub_download(repo_id, p, repo_type=REPO_TYPE, revision=oid, token=token, cache_dir=download_dir) for p in paths]
        result[name] = _parquet_ids(local)
    return result


def _parquet_ids(paths: Sequence[str]) -> tuple:
    import pyarrow.parquet as pq

    schema = pq.read_schema(paths[0])
    names = schema.names
    key = next((c for c in ID_COLUMNS if c in names), None)
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
    from huggingface_hub.errors import RepositoryNotFoundError

    check_repo_id(repo_id)
    check_ref_name(branch, "branch")
    if tag is not None:
        check_ref_name(tag, "tag")
    try:
        api.repo_info(repo_id, repo_type=REPO_TYPE, token=token)
        repo_exists = True
    except RepositoryNotFoundError:
        repo_exists = False

    branch_exists, head_oid, previous_tag, previous_oid, remote = False, None, None, None, {}
    tags: dict = {}
    if repo_exists:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE, token=token)
        tags = {t.name: t.target_commit for t in refs.tags}
        branches = {b.name: b.target_commit for b in refs.branches}
        branch_exists = branch in branches
        base = branch if branch_exists else DEFAULT_BRANCH
        head_oid = branches.get(base)
        if tag is not None and tag in tags:
            raise PublishError(
                f"tag {tag!r} already exists on {repo_id} (commit {tags[tag][:12]}): a published revision "
                "is never overwritten; choose another --tag (or leave it out to use the next vN)"
            )
        tags_by_commit: dict = collections.defaultdict(list)
        for name, oid in tags.items():
            tags_by_commit[oid].append(name)
        if head_oid is not None:
            previous_tag, previous_oid = _previous_tag(api, repo_id, head_oid, tags_by_commit, token)
            for entry in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=head_oid, recursive=True, token=token):
                if getattr(entry, "size", None) is not None and hasattr(entry, "blob_id"):
                    remote[entry.path] = entry.lfs.sha256 if entry.lfs else entry.blob_id
    tag = tag or next_auto_tag(tags)

    old: dict = {}
    if previous_oid is not None:
        download_dir = Path(tempfile.mkdtemp(prefix="push-previous-"))
        try:
            old = _previous_ids(api, repo_id, previous_oid, token, download_dir)
        finally:
            shutil.rmtree(download_dir, ignore_errors=True)
    changes = {}
    for name, summary in checked.configs.items():
        old_key, old_ids = old.get(name, (None, None))
        changes[name] = diff_ids(name, summary, old_key, old_ids if name in old else None, first=previous_oid is None)
    for name, (old_key, old_ids) in old.items():
        if name not in checked.configs:
            changes[name] = diff_ids(name, None, old_key, old_ids, first=False)
    record = RevisionRecord(tag, previous_tag, changes)

    files = []
    for f in checked.files:
        if f.path_in_repo in (CARD_FILENAME, CHANGES_FILE):
            continue
        files.append(f)
    files.append(LocalFile.from_bytes(CARD_FILENAME, card_with_revision(checked.card_text, record, repo_id).encode("utf-8")))
    files.append(LocalFile.from_bytes(CHANGES_FILE, record.changes_json()))
    files.sort(key=lambda f: f.path_in_repo)
    unchanged = [f.path_in_repo for f in files if remote.get(f.path_in_repo) in (f.sha256, _git_oid(f))]
    local_paths = {f.path_in_repo for f in files}
    deletions = sorted(p for p in remote if p not in local_paths and p not in HUB_MANAGED_FILES)
    return PushPlan(
        repo_id=repo_id,
        branch=branch,
        tag=tag,
        endpoint=api.endpoint,
        repo_exists=repo_exists,
        branch_exists=branch_exists,
        head_oid=head_oid,
        previous_tag=previous_tag,
        record=record,
        files=files,
        unchanged=unchanged,
        deletions=deletions,
        private=private,
        message=message or f"Publish revision {tag}",
    )


def _git_oid(f: LocalFile) -> Optional[str]:
    if f.size > 10 * 1024 * 1024:
        return None
    data = f.source if isinstance(f.source, bytes) else Path(f.source).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# --- 4. the push -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    branch: str
    tag: str
    commit_oid: str
    url: str


class PushFailed(PublishError):
    """A Hub call failed during ``stage``; ``committed`` says whether the new commit exists."""

    def __init__(self, stage: str, cause: BaseException, *, committed: Optional[str] = None):
        super().__init__(f"{stage}: {cause}")
        self.stage, self.cause, self.committed = stage, cause, committed


def execute_push(api, plan: PushPlan, *, token=None) -> PushResult:
    """Create the repo (if needed) and the branch (if needed), commit every file at once, tag it.

    Raises :class:`PushFailed` naming the stage that failed. Until the commit call succeeds the
    target branch and every tag are exactly as before.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    stage = "creating the repository"
    try:
        if not plan.repo_exists:
            api.create_repo(plan.repo_id, repo_type=REPO_TYPE, private=plan.private, exist_ok=True, token=token)
        elif plan.private:
            logger.warning("--private only applies to a new repository: %s keeps its current visibility", plan.repo_id)
        head = plan.head_oid
        if head is None:
            head = api.repo_info(plan.repo_id, repo_type=REPO_TYPE, revision=DEFAULT_BRANCH, token=token).sha
        if not plan.branch_exists and plan.branch != DEFAULT_BRANCH:
            stage = f"creating branch {plan.branch}"
            api.create_branch(plan.repo_id, repo_type=REPO_TYPE, branch=plan.branch, revision=head, exist_ok=True, token=token)
        operations = [CommitOperationAdd(f.path_in_repo, f.source if isinstance(f.source, bytes) else str(f.source)) for f in plan.files]
        operations += [CommitOperationDelete(path) for path in plan.deletions]
        stage = f"uploading {len(plan.files)} files and committing them to branch {plan.branch}"
        logger.info("committing %d files (%s) to %s@%s", len(plan.files), _human(plan.upload_bytes), plan.repo_id, plan.branch)
        commit = api.create_commit(
            plan.repo_id,
            operations,
            commit_message=plan.message,
            commit_description=plan.record.prose(plan.repo_id),
            repo_type=REPO_TYPE,
            revision=plan.branch,
            parent_commit=head,
            token=token,
        )
    except Exception as e:
        raise PushFailed(stage, e) from e
    try:
        api.create_tag(
            plan.repo_id, repo_type=REPO_TYPE, tag=plan.tag, revision=commit.oid, tag_message=plan.message, token=token
        )
    except Exception as e:
        raise PushFailed(f"tagging commit {commit.oid[:12]} as {plan.tag}", e, committed=commit.oid) from e
    url = f"{plan.endpoint}/datasets/{plan.repo_id}/tree/{plan.tag}"
    return PushResult(plan.repo_id, plan.branch, plan.tag, commit.oid, url)

"""Step 1 of a push: check a Hub-ready folder (it loads with ``datasets``, and its card tells the truth)."""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from pipeline.publish.hub import PublishError
from pipeline.publish.names import CARD_FILENAME, IMAGE_SHA256, ROW_ID_KEY

logger = logging.getLogger(__name__)

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
    row_id: Optional[str] = None  # the card's row_id: the column that identifies a row

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


def id_key_of(features, row_id: Optional[str] = None) -> Optional[str]:
    """How rows of a config are identified: the card's ``row_id`` column, the image bytes' sha256, or None.

    The dataset package names its id column in the card (``row_id: candidate_id`` for ImageNetV2,
    ``ti_index`` for CIFAR-10.1); the publisher keeps no table of them.
    """
    import datasets

    if row_id and row_id in features:
        return row_id
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
    >>> _ = write_hub_folder(out, [ConfigExport("c", ds, default=True)], "# Toy", {"license": "mit", "row_id": "candidate_id"})
    >>> checked = check_folder(out)
    >>> checked.configs["c"].num_rows, checked.configs["c"].id_key
    (2, 'candidate_id')
    """
    folder = Path(folder)
    card_text, metadata_configs, infos, row_id = _read_card(folder)
    files, problems = _folder_files(folder)
    problems = _card_problems(folder / CARD_FILENAME, metadata_configs, infos) + problems
    if problems:
        raise FolderError(_problem_list(folder, problems))
    summaries, problems = _check_configs(folder, metadata_configs, infos, cache_dir, row_id)
    if problems:
        raise FolderError(_problem_list(folder, problems))
    local_files = [LocalFile.from_path(rel, folder / rel) for rel in files]
    return CheckedFolder(folder, card_text, summaries, local_files, row_id)


def _read_card(folder: Path):
    """The card's text, its ``configs`` and its ``dataset_info``; FolderError when there is no readable card."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

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
    except Exception as e:  # noqa: BLE001 - any YAML or schema problem
        raise FolderError(f"the card {card_path} has invalid YAML metadata: {e}") from None
    if not card.data.get("dataset_info"):
        infos = {}
    return card_text, metadata_configs, infos, card.data.get(ROW_ID_KEY)


def _card_problems(card_path: Path, metadata_configs, infos) -> list:
    problems = []
    if not metadata_configs:
        problems.append(f"the card {card_path} declares no `configs:` (each config with its data_files)")
    if not infos:
        problems.append(f"the card {card_path} has no `dataset_info:` (features and row counts per config)")
    for name in infos:
        if metadata_configs and name not in metadata_configs:
            problems.append(f"config {name!r} is in the card's dataset_info but not in its configs")
    return problems


def _check_configs(folder: Path, metadata_configs, infos, cache_dir: Optional[str], row_id: Optional[str]) -> tuple[dict, list]:
    """Load every config (in a temporary cache unless ``cache_dir``); its summary and its problems."""
    import datasets

    summaries, problems = {}, []
    own_cache = cache_dir is None
    cache = Path(cache_dir) if cache_dir else Path(tempfile.mkdtemp(prefix="push-check-"))
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        for name, entry in metadata_configs.items():
            summary, config_problems = _check_config(folder, name, entry, infos.get(name), cache, row_id)
            problems += config_problems
            if summary is not None:
                summaries[name] = summary
    finally:
        if bars:
            datasets.enable_progress_bars()
        if own_cache:
            shutil.rmtree(cache, ignore_errors=True)
    return summaries, problems


def _problem_list(folder: Path, problems: Sequence[str]) -> str:
    lines = "\n".join(f"  - {p}" for p in problems)
    return f"refusing to push {folder}: it is not a consistent Hub-ready dataset folder:\n{lines}\nRebuild the folder (`python -m <dataset> build`) or fix the card, then push again."


def _check_config(folder: Path, name: str, entry: Mapping, info, cache: Path, row_id: Optional[str] = None):
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
    key = id_key_of(features, row_id)
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

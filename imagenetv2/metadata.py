"""Candidate metadata: each image's Flickr search record.

Every candidate was found by a Flickr search; its record (photo id, URL, dates, search key, size)
is in the search-result files of the ImageNetV2 repository (``data/search_results/*.json``, about
73 MB). The package ships the 4,745 records of final-set images small enough to copy
(``candidates_in_final_sets.jsonl``); the builder adds the full files when it can get them:
downloaded at a pinned commit when online, or from ``<data_dir>/search_results/`` when present.
Only the records of the set's own images are kept in memory.
"""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping

logger = logging.getLogger(__name__)

GITHUB_REPO = "modestyachts/ImageNetV2"
GITHUB_COMMIT = "b14e00d85f3065a18486d1a43181990a538e0122"
SEARCH_RESULTS_DIR = "data/search_results"
# The file list comes from GitHub's tree API at the pinned commit; the files from raw URLs.
TREE_URL = "https://api.github.com/repos/{repo}/git/trees/{commit}?recursive=1"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
PACKAGED_RECORDS = "data/candidates_in_final_sets.jsonl"


def _keep(records: Iterable[Mapping], wanted: Mapping[str, str], found: dict) -> None:
    """Keep the records of wanted ids. A record's wnid is the class it was *searched* for, which
    may differ from the class it was assigned to; where an id has several records, prefer one
    whose wnid is the assigned class, else the first."""
    for record in records:
        candidate_id = record.get("id_ours")
        if candidate_id not in wanted:
            continue
        current = found.get(candidate_id)
        if current is None or (current.get("wnid") != wanted[candidate_id] and record.get("wnid") == wanted[candidate_id]):
            found[candidate_id] = record


@lru_cache(maxsize=1)
def _packaged() -> tuple:
    text = resources.files("imagenetv2").joinpath(PACKAGED_RECORDS).read_text("utf-8")
    return tuple(json.loads("[" + ",".join(line for line in text.splitlines() if line.strip()) + "]"))


def packaged_records(wanted: Mapping[str, str]) -> dict[str, dict]:
    """Records shipped with the package, for the candidate ids in ``wanted`` (id → wnid)."""
    found: dict[str, dict] = {}
    _keep(_packaged(), wanted, found)
    return found


def search_result_records(files: Iterable[os.PathLike | str], wanted: Mapping[str, str]) -> dict[str, dict]:
    """Records of the candidate ids in ``wanted`` found in search-result JSON files (lists of records)."""
    found: dict[str, dict] = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            try:
                records = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"search-result file {path} is not valid JSON: {e}") from e
        if not isinstance(records, list):
            raise ValueError(f"search-result file {path} holds a {type(records).__name__}; expected a list of records")
        _keep(records, wanted, found)
    return found


def local_search_result_files(data_dir: os.PathLike | str) -> list[Path]:
    """The search-result files under ``data_dir`` (``search_results/`` or ``data/search_results/``)."""
    for sub in ("search_results", SEARCH_RESULTS_DIR):
        folder = Path(data_dir) / sub
        if folder.is_dir():
            return sorted(folder.glob("*.json"))
    return []


def download_search_result_files(dl_manager) -> list[str]:
    """Download the search-result files at the pinned commit through the download manager.

    Returns an empty list (and logs a warning) when GitHub cannot be reached: the build then uses
    the packaged records only, and the card says how many rows carry metadata.
    """
    try:
        tree_path = dl_manager.download(TREE_URL.format(repo=GITHUB_REPO, commit=GITHUB_COMMIT))
        with open(tree_path, encoding="utf-8") as f:
            tree = json.load(f)
        paths = sorted(
            entry["path"]
            for entry in tree.get("tree", [])
            if entry.get("type") == "blob"
            and entry["path"].startswith(SEARCH_RESULTS_DIR + "/")
            and entry["path"].endswith(".json")
        )
        urls = [RAW_URL.format(repo=GITHUB_REPO, commit=GITHUB_COMMIT, path=p) for p in paths]
        return list(dl_manager.download(urls)) if urls else []
    except Exception as e:  # network errors come in many types; metadata is optional
        logger.warning(
            "could not download the ImageNetV2 search results (%s: %s); using the %s packaged records only",
            type(e).__name__,
            e,
            "4,745",
        )
        return []


def candidate_records(wanted: Mapping[str, str], search_result_files: Iterable[os.PathLike | str] = ()) -> dict[str, dict]:
    """All known records for ``wanted`` (candidate id → wnid): packaged ones, then the files'."""
    found = packaged_records(wanted)
    missing = {k: v for k, v in wanted.items() if k not in found}
    if missing:
        found.update(search_result_records(search_result_files, missing))
    logger.info("candidate metadata: %d of %d images have a search record", len(found), len(wanted))
    return found

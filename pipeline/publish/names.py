"""The names a push shares across its steps: repository type, files, card markers, tag pattern."""

from __future__ import annotations

import re

REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"
CARD_FILENAME = "README.md"
CHANGES_FILE = "revisions/changes.json"
ROW_ID_KEY = "row_id"  # the card's YAML key naming the column that identifies a row (set by the dataset package)
IMAGE_SHA256 = "sha256(image)"
HUB_MANAGED_FILES = frozenset({".gitattributes"})  # kept on the Hub, never deleted by a push
SECTION_START = "<!-- revision:start -->"
SECTION_END = "<!-- revision:end -->"
AUTO_TAG_RE = re.compile(r"^v(\d+)$")


def human_size(size: int) -> str:
    """``1234567`` -> ``'1.2 MB'`` (decimal units, as the Hub shows sizes)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000

"""Step 2 of a push: what changed in each config against the previous release, and the card that records it."""

from __future__ import annotations

import collections
import json
import logging
from dataclasses import dataclass
from typing import Optional

from pipeline.publish.folder import ConfigSummary
from pipeline.publish.names import (
    CHANGES_FILE,
    IMAGE_SHA256,
    SECTION_END,
    SECTION_START,
)

logger = logging.getLogger(__name__)

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
class ReleaseRecord:
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
            "id_columns": f"the card's row_id column, else {IMAGE_SHA256}",
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


def card_with_release(card_text: str, record: ReleaseRecord, repo_id: str) -> str:
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

"""The search configuration: the paper's Flickr settings and expansion steps, as data.

The defaults are ``pipeline/rebuild/data/search.yaml`` (shown in ``docs/rebuilding.md``); a
file given with ``--config`` overrides any of its keys (``steps`` as a whole list). Every
candidate record carries the settings that found it, and ``search.json`` the whole config.

>>> config = load_search_config()
>>> config.sort, config.per_page, config.max_images, config.min_uploaded_date, config.max_uploaded_date
('date-posted-asc', 500, 100, '2012-07-11', '2013-07-11')
>>> [(s.name, s.settings["max_images"], s.settings["max_uploaded_date"]) for s in config.plan()][2:4]
[('raised-limit', 200, '2013-07-11'), ('extended-window', 200, '2014-07-11')]
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Mapping, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

QUERY_KINDS = ("lemmas", "parent-word", "compound", "hand-written")
DATE_KEYS = ("min_taken_date", "max_taken_date", "min_uploaded_date", "max_uploaded_date")
STEP_SETTINGS = ("max_images",) + DATE_KEYS
# Flickr's sort orders that do not depend on when the search runs (relevance and interestingness do).
SORTS = ("date-posted-asc", "date-posted-desc", "date-taken-asc", "date-taken-desc")
URL_TYPES = ("url_o", "url_k", "url_h", "url_l", "url_b", "url_c", "url_z", "url_n", "url_m", "url_q", "url_s", "url_t", "url_sq")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Step:
    """One expansion step: which queries, and the settings it changes from the step before."""

    name: str
    queries: str
    max_images: Optional[int] = None
    min_taken_date: Optional[str] = None
    max_taken_date: Optional[str] = None
    min_uploaded_date: Optional[str] = None
    max_uploaded_date: Optional[str] = None
    file: Optional[str] = None  # hand-written queries: {wnid: [query, ...]} (JSON or YAML)


@dataclass(frozen=True)
class PlannedStep:
    """A step with the settings in force for it (carried over from the earlier steps)."""

    index: int
    name: str
    queries: str
    settings: Mapping[str, object]
    file: Optional[str]


@dataclass(frozen=True)
class SearchConfig:
    """Everything that decides which queries ``search`` sends (see ``data/search.yaml``)."""

    endpoint: str
    sort: str
    per_page: int
    max_images: int
    min_taken_date: str
    max_taken_date: str
    min_uploaded_date: str
    max_uploaded_date: str
    extras: tuple[str, ...]
    url_order: tuple[str, ...]
    target_candidates: int
    requests_per_second: float
    retries: int
    backoff_seconds: float
    timeout_seconds: float
    steps: tuple[Step, ...] = field(default=())

    def __post_init__(self):
        if self.sort not in SORTS:
            raise ValueError(f"search config: sort {self.sort!r} is not allowed; use one of {', '.join(SORTS)} (relevance and interestingness change with the day of the search)")
        for key in ("per_page", "max_images", "target_candidates"):
            _positive_int(getattr(self, key), key)
        if self.per_page > 500:
            raise ValueError(f"search config: per_page {self.per_page} is over 500, the most Flickr serves per page")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"search config: retries must be a whole number >= 0, got {self.retries!r}")
        for key in ("requests_per_second", "timeout_seconds"):
            if not isinstance(getattr(self, key), (int, float)) or getattr(self, key) <= 0:
                raise ValueError(f"search config: {key} must be a positive number, got {getattr(self, key)!r}")
        if not isinstance(self.backoff_seconds, (int, float)) or self.backoff_seconds < 0:
            raise ValueError(f"search config: backoff_seconds must be >= 0, got {self.backoff_seconds!r}")
        for key in DATE_KEYS:
            _date(getattr(self, key), key)
        bad = [u for u in self.url_order if u not in URL_TYPES]
        if bad or not self.url_order:
            raise ValueError(f"search config: url_order {list(self.url_order)!r} must list Flickr sizes from {', '.join(URL_TYPES)}")
        if not self.steps:
            raise ValueError("search config: steps is empty; give at least one step (queries: lemmas)")
        for step in self.steps:
            _check_step(step)
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"search config: step names {names} must be unique")

    def plan(self) -> list[PlannedStep]:
        """The steps in order, each with the settings in force for it (changes carry over)."""
        settings = {key: getattr(self, key) for key in STEP_SETTINGS}
        planned = []
        for index, step in enumerate(self.steps):
            settings = {key: getattr(step, key) if getattr(step, key) is not None else value for key, value in settings.items()}
            planned.append(PlannedStep(index, step.name, step.queries, dict(settings), step.file))
        return planned

    def record(self) -> dict:
        """The config as plain data (recorded in ``search.json``)."""
        return dataclasses.asdict(self)


def _positive_int(value, key: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"search config: {key} must be a positive whole number, got {value!r}")


def _date(value, key: str) -> None:
    if not isinstance(value, str) or not DATE.fullmatch(value):
        raise ValueError(f"search config: {key} must be a date written YYYY-MM-DD (quote it in YAML), got {value!r}")


def _check_step(step: Step) -> None:
    if step.queries not in QUERY_KINDS:
        raise ValueError(f"search config: step {step.name!r} has queries {step.queries!r}; use one of {', '.join(QUERY_KINDS)}")
    if step.max_images is not None:
        _positive_int(step.max_images, f"steps[{step.name}].max_images")
    for key in DATE_KEYS:
        if getattr(step, key) is not None:
            _date(getattr(step, key), f"steps[{step.name}].{key}")


def _read_yaml(path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as e:
        raise ValueError(f"search config {path}: not valid YAML ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"search config {path}: expected a mapping of settings, got {type(data).__name__}")
    return data


def default_config_text() -> str:
    """The text of the default config file (``data/search.yaml``)."""
    return resources.files("pipeline.rebuild").joinpath("data/search.yaml").read_text("utf-8")


def load_search_config(path: Optional[PathLike] = None, **overrides) -> SearchConfig:
    """The defaults, overridden by the file ``path`` (YAML or JSON) and then by ``overrides`` (not None)."""
    data = _read_yaml(resources.files("pipeline.rebuild").joinpath("data/search.yaml"))
    base = Path(".")
    if path is not None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"search config {path} does not exist")
        given = _read_yaml(Path(path))
        known = {f.name for f in dataclasses.fields(SearchConfig)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"search config {path}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(sorted(known))}")
        data.update(given)
        base = Path(path).parent
    data.update({k: v for k, v in overrides.items() if v is not None})
    data["steps"] = tuple(_step(s, base) for s in data.get("steps") or ())
    for key in ("extras", "url_order"):
        data[key] = tuple(data[key])
    for key in DATE_KEYS:
        data[key] = str(data[key]) if hasattr(data[key], "isoformat") else data[key]
    return SearchConfig(**data)


def _step(raw, base: Path) -> Step:
    if not isinstance(raw, Mapping) or "name" not in raw or "queries" not in raw:
        raise ValueError(f"search config: each step needs a name and queries ({', '.join(QUERY_KINDS)}), got {raw!r}")
    known = {f.name for f in dataclasses.fields(Step)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"search config: step {raw['name']!r} has unknown key(s) {', '.join(unknown)}; a step has {', '.join(sorted(known))}")
    values = {k: (str(v) if hasattr(v, "isoformat") else v) for k, v in raw.items()}
    if values.get("file"):
        values["file"] = str(base / values["file"]) if not os.path.isabs(values["file"]) else values["file"]
    return Step(**values)

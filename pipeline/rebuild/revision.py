"""Revisions: the output of ``sample``, in the released revision files' format.

A revision file records how a set was sampled and which images it holds. Its keys are those of
the released files (``imagenetv2-b-33.json`` etc.), which depend on the rule:

====================  ========================  ==================================================
rule (``--rule``)     ``sampling_function``     rule-specific keys
====================  ========================  ==================================================
matched-frequency     sample_wnid_histogram     histogram_bins, min_num_annotations_candidates,
                                                min_num_annotations_val, min_num_val_images_per_wnid,
                                                allow_upward_sampling
threshold-0.7         sample_above_threshold    selection_frequency_threshold, min_num_annotations,
                                                wnid_thresholds (per-class overrides, maybe {})
top-images            sample_best               min_num_annotations
====================  ========================  ==================================================

and all have ``target_size``, ``near_duplicate_review_targets``, ``time_string``, ``username``,
``seed``, ``image_filenames`` (``[candidate id, wnid]`` pairs), ``is_valid``, ``starting_from``
(the previous revision's file name, when chained) and ``output_filename``. A revision sampled
for a subset of the classes adds ``wnids`` (ours; the released ones cover all 1000); a
matched-frequency revision matched on estimated true selection frequencies adds ``match_on``
(``posterior``) and ``selection_prior`` (ours; :mod:`pipeline.rebuild.selection_prior`).
The configuration in a revision file is everything needed, with the same inputs, to sample it
again bit for bit (:func:`sampling_config`; ``python -m pipeline sample --config-from``).
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Optional, Union

from imagenetv2.variants import VARIANTS
from pipeline.core.atomic import atomic_write_text
from pipeline.rebuild.near_duplicate_rules import RELEASED_REVIEW_TARGETS
from pipeline.rebuild.sampling_rules import STANDARD_BINS

PathLike = Union[str, "os.PathLike[str]"]

# the rules, their function names in revision files and the released revisions: from the variant table
RULES = {v.config_name: v.sampling_function for v in VARIANTS}
RULE_OF_FUNCTION = {function: rule for rule, function in RULES.items()}
RELEASED = {v.config_name: v.revision for v in VARIANTS}
NUM_CLASSES = 1000
TIME_FORMAT = "%Y-%m-%d_%H:%M:%S_UTC"

# Key order of the released files, per sampling function (optional keys included where they go).
KEY_ORDER = {
    "sample_wnid_histogram": (
        "sampling_function", "target_size", "histogram_bins", "min_num_annotations_candidates",
        "min_num_annotations_val", "min_num_val_images_per_wnid", "near_duplicate_review_targets",
        "time_string", "username", "seed", "image_filenames", "is_valid", "allow_upward_sampling",
        "starting_from", "wnids", "match_on", "selection_prior", "output_filename",
    ),
    "sample_above_threshold": (
        "sampling_function", "target_size", "selection_frequency_threshold", "min_num_annotations",
        "near_duplicate_review_targets", "time_string", "username", "seed", "image_filenames",
        "is_valid", "starting_from", "wnid_thresholds", "wnids", "output_filename",
    ),
    "sample_best": (
        "sampling_function", "target_size", "min_num_annotations", "near_duplicate_review_targets",
        "time_string", "username", "seed", "image_filenames", "is_valid", "starting_from", "wnids",
        "output_filename",
    ),
}
OPTIONAL_KEYS = {"starting_from", "wnid_thresholds", "wnids", "match_on", "selection_prior"}
COUNT_FIELDS = ("min_num_annotations_candidates", "min_num_annotations_val", "min_num_val_images_per_wnid", "min_num_annotations")


@dataclass(frozen=True)
class SamplingConfig:
    """Everything that decides a revision besides its inputs (pool, blacklist, near-duplicates, previous).

    Only the fields of ``rule`` are used (and recorded); the defaults are the released ones.
    """

    rule: str
    seed: int
    per_class: int = 10
    wnids: Optional[tuple[str, ...]] = None  # the classes sampled; None = the 1,000 ImageNet classes
    near_duplicate_review_targets: Mapping[str, float] = field(default_factory=lambda: dict(RELEASED_REVIEW_TARGETS))
    # matched-frequency
    histogram_bins: tuple[float, ...] = STANDARD_BINS
    min_num_annotations_candidates: int = 10
    min_num_annotations_val: int = 10
    min_num_val_images_per_wnid: int = 20
    allow_upward_sampling: bool = True
    # "observed", or "posterior": bin each image's posterior-mean selection frequency (ours; pipeline.rebuild.selection_prior)
    match_on: str = "observed"
    selection_prior: str = "mixture"  # with match_on="posterior": "mixture" or "beta-binomial"
    # threshold-0.7 and top-images
    min_num_annotations: int = 10
    selection_frequency_threshold: float = 0.7
    wnid_thresholds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"unknown sampling rule {self.rule!r}; the rules are {', '.join(RULES)}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.per_class, int) or self.per_class < 1:
            raise ValueError(f"per_class must be a positive integer, got {self.per_class!r}")
        from pipeline.rebuild.selection_prior import MATCH_ON, PRIORS

        if self.match_on not in MATCH_ON or self.selection_prior not in PRIORS:
            raise ValueError(f"match_on {self.match_on!r} / selection_prior {self.selection_prior!r}: allowed are {MATCH_ON} / {PRIORS}")
        if self.match_on != "observed" and self.rule != "matched-frequency":
            raise ValueError(f"match_on {self.match_on!r} applies to the matched-frequency rule only, not {self.rule}")
        self._check_counts_and_ranges()
        if self.wnids is not None and (not self.wnids or len(set(self.wnids)) != len(self.wnids) or not all(isinstance(w, str) and w for w in self.wnids)):
            raise ValueError(f"wnids must be distinct class ids (the classes sampled), got {self.wnids!r}")
        from pipeline.rebuild.classes import imagenet_1k

        known = set(self.wnids) if self.wnids is not None else imagenet_1k()  # the sampled classes: given, or ImageNet-1k
        unknown = [w for w in self.wnid_thresholds if w not in known]
        if unknown:
            raise ValueError(f"wnid_thresholds: unknown wnid(s) {', '.join(unknown[:5])}; use ids of the sampled classes")
        for name, value in [("selection_frequency_threshold", self.selection_frequency_threshold), *self.wnid_thresholds.items()]:
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"threshold {name} = {value!r} is not a selection frequency in [0, 1]")

    def _check_counts_and_ranges(self) -> None:
        for name in COUNT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0 (a count), got {value!r}")
        bins = list(self.histogram_bins)
        if not all(isinstance(b, (int, float)) and 0.0 <= b <= 1.0 for b in bins) or bins != sorted(set(bins)):
            raise ValueError(f"histogram_bins {bins!r} must be increasing selection frequencies in [0, 1], like 0.2,0.4,0.6,0.8")
        for metric, value in dict(self.near_duplicate_review_targets).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
                raise ValueError(f"near_duplicate_review_targets {metric} = {value!r} must be a finite distance >= 0")

    @property
    def sampling_function(self) -> str:
        return RULES[self.rule]

    @property
    def class_wnids(self) -> list[str]:
        from imagenetv2.classes import wnids

        return sorted(self.wnids) if self.wnids is not None else wnids()

    @property
    def target_size(self) -> int:
        return self.per_class * len(self.class_wnids)

    def revision_keys(self) -> dict:
        """The configuration keys a revision file records for this rule."""
        keys: dict = {
            "sampling_function": self.sampling_function,
            "target_size": self.target_size,
            "near_duplicate_review_targets": dict(self.near_duplicate_review_targets),
            "seed": self.seed,
        }
        if self.rule == "matched-frequency":
            keys |= {
                "histogram_bins": list(self.histogram_bins),
                "min_num_annotations_candidates": self.min_num_annotations_candidates,
                "min_num_annotations_val": self.min_num_annotations_val,
                "min_num_val_images_per_wnid": self.min_num_val_images_per_wnid,
                "allow_upward_sampling": self.allow_upward_sampling,
            }
            if self.match_on != "observed":  # recorded only when set, so released revisions keep their keys
                keys |= {"match_on": self.match_on, "selection_prior": self.selection_prior}
        elif self.rule == "threshold-0.7":
            keys |= {
                "selection_frequency_threshold": self.selection_frequency_threshold,
                "min_num_annotations": self.min_num_annotations,
                "wnid_thresholds": dict(self.wnid_thresholds),
            }
        else:
            keys["min_num_annotations"] = self.min_num_annotations
        if self.wnids is not None:
            keys["wnids"] = sorted(self.wnids)
        return keys


@dataclass(frozen=True)
class Revision:
    """A revision file's contents."""

    config: SamplingConfig
    image_filenames: tuple[tuple[str, str], ...]
    is_valid: bool
    time_string: str
    username: str
    output_filename: str
    starting_from: Optional[str] = None

    @property
    def name(self) -> str:
        return self.output_filename.removesuffix(".json")

    def to_json(self) -> dict:
        """The file's JSON object, keys in the released files' order."""
        values = self.config.revision_keys() | {
            "time_string": self.time_string,
            "username": self.username,
            "image_filenames": [list(pair) for pair in self.image_filenames],
            "is_valid": self.is_valid,
            "starting_from": self.starting_from,
            "output_filename": self.output_filename,
        }
        return {k: values[k] for k in KEY_ORDER[self.config.sampling_function] if k in values and not (k in OPTIONAL_KEYS and values[k] is None)}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    def save(self, path: PathLike) -> Path:
        """Write the file atomically."""
        return atomic_write_text(path, self.dumps())


def sampling_config(data: Mapping, source: str = "revision") -> SamplingConfig:
    """The :class:`SamplingConfig` recorded in a revision's JSON object."""
    function = data.get("sampling_function")
    if function not in RULE_OF_FUNCTION:
        raise ValueError(
            f"{source}: sampling_function {function!r} is not one of {', '.join(RULE_OF_FUNCTION)}; "
            f"this is not a revision of a sampling rule"
        )
    rule = RULE_OF_FUNCTION[function]
    required = set(KEY_ORDER[function]) - OPTIONAL_KEYS - {"is_valid"}
    missing = sorted(k for k in required if k not in data)
    if missing:
        raise ValueError(f"{source}: missing key(s) {', '.join(missing)} of a {function} revision")
    wnids = data.get("wnids")
    n_classes = len(wnids) if wnids is not None else NUM_CLASSES
    if data["target_size"] % n_classes:
        raise ValueError(f"{source}: target_size {data['target_size']} is not a multiple of the {n_classes} classes")
    common = dict(
        rule=rule,
        seed=data["seed"],
        per_class=data["target_size"] // n_classes,
        wnids=tuple(wnids) if wnids is not None else None,
        near_duplicate_review_targets=dict(data["near_duplicate_review_targets"]),
    )
    if rule == "matched-frequency":
        return SamplingConfig(
            **common,
            histogram_bins=tuple(data["histogram_bins"]),
            min_num_annotations_candidates=data["min_num_annotations_candidates"],
            min_num_annotations_val=data["min_num_annotations_val"],
            min_num_val_images_per_wnid=data["min_num_val_images_per_wnid"],
            allow_upward_sampling=bool(data.get("allow_upward_sampling", False)),
            match_on=data.get("match_on", "observed"),
            selection_prior=data.get("selection_prior", "mixture"),
        )
    if rule == "threshold-0.7":
        return SamplingConfig(
            **common,
            selection_frequency_threshold=data["selection_frequency_threshold"],
            min_num_annotations=data["min_num_annotations"],
            wnid_thresholds=dict(data.get("wnid_thresholds") or {}),
        )
    return SamplingConfig(**common, min_num_annotations=data["min_num_annotations"])


def revision_from_json(data: Mapping, source: str = "revision") -> Revision:
    """A :class:`Revision` from a revision file's JSON object, checking its image list."""
    config = sampling_config(data, source)
    classes = set(config.class_wnids)
    pairs, seen = [], set()
    for i, pair in enumerate(data["image_filenames"]):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ValueError(f"{source}: image_filenames[{i}] is {pair!r}; expected a [candidate id, wnid] pair")
        if pair[1] not in classes:
            raise ValueError(f"{source}: image_filenames[{i}] has wnid {pair[1]!r}, not one of the revision's classes")
        if pair[0] in seen:
            raise ValueError(f"{source}: image_filenames[{i}]: candidate {pair[0]} is listed twice")
        seen.add(pair[0])
        pairs.append((pair[0], pair[1]))
    return Revision(
        config=config,
        image_filenames=tuple(pairs),
        is_valid=bool(data.get("is_valid", True)),
        time_string=data["time_string"],
        username=data["username"],
        output_filename=data.get("output_filename") or f"{Path(source).stem}.json",
        starting_from=data.get("starting_from"),
    )


def load_revision(source: PathLike) -> Revision:
    """Load a revision file, or a released revision by name (``imagenetv2-b-33``).

    >>> revision = load_revision("imagenetv2-a-44")
    >>> revision.config.rule, revision.config.seed, len(revision.image_filenames), revision.config.wnid_thresholds["n03804744"]
    ('threshold-0.7', 600717499, 10000, 0.5)
    """
    text = os.fspath(source)
    path = Path(text)
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not a JSON revision file ({e.msg} at line {e.lineno})") from None
        return revision_from_json(data, str(path))
    if text in RELEASED.values():
        from imagenetv2.revisions import released_revision_json

        return revision_from_json(released_revision_json(text), text)
    raise FileNotFoundError(f"revision {text} is neither a file nor a released revision ({', '.join(RELEASED.values())})")


def now_time_string() -> str:
    return datetime.now(timezone.utc).strftime(TIME_FORMAT)


def current_username() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def output_paths(output: PathLike) -> tuple[Path, Path, Path]:
    """The revision file and its report and decisions files beside it."""
    output = Path(output)
    stem = output.name.removesuffix(".json")
    return output, output.with_name(f"{stem}.report.json"), output.with_name(f"{stem}.decisions.parquet")

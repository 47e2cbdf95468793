"""The ``sample`` stage: a pool's tables and a sampling config → a revision, a report, decisions.

Inputs besides the pool and its selection frequencies (all optional): a blacklist (candidates
removed by the final review), confirmed near-duplicate pairs with overrides, the near-duplicate
review table, and the previous revision to chain from (formats: :mod:`pipeline.rebuild.sample_inputs`).
Outputs, checked before any work and written as one unit (all three new, or none)::

    <name>.json               the revision (released format, :mod:`pipeline.rebuild.revision`)
    <name>.report.json        counts per exclusion reason, slots filled upward, carried over,
                              mean selection frequency of the set and of the originals, inputs' sha256
    <name>.decisions.parquet  one row per candidate of the sampled classes: what the rule decided
                              (and the blacklist's reason for the blacklisted ones)
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from pipeline.core.integrity import file_digest
from pipeline.core.ownership import check_output_file, owned_files
from pipeline.rebuild.pool import SELECTION_FREQUENCIES as SELECTION_FREQUENCIES_NAME
from pipeline.rebuild.pool import Pool, load_pool
from pipeline.rebuild.review_folder import read_review_folder
from pipeline.rebuild.sample_inputs import read_blacklist, read_id_list, read_near_duplicates, read_review  # noqa: F401 (re-exported)
from pipeline.rebuild.near_duplicate_rules import resolve_near_duplicates, review_finished
from pipeline.rebuild.revision import Revision, output_paths, SamplingConfig, current_username, load_revision, now_time_string
from pipeline.rebuild.sampling_rules import (
    REASONS,
    CandidateArrays,
    SamplingResult,
    matched_frequency_targets,
    sample_matched_frequency,
    sample_threshold,
    sample_top_images,
)
from pipeline.rebuild.tables import read_table, write_table

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class SampleOutput:
    revision: Revision
    report: dict
    decisions: pa.Table


def _frequencies_for(table: pa.Table, ids: pa.Array, wnids: pa.Array, id_column: str) -> tuple[np.ndarray, np.ndarray]:
    """Selection frequency and annotation count of each (id, wnid), 0 where never shown."""
    keys = pa.table({id_column: ids, "wnid": wnids, "_row": pa.array(np.arange(len(ids)))})
    sf = table.select(["image_id", "wnid", "num_shown", "selection_frequency"]).rename_columns([id_column, "wnid", "num_shown", "selection_frequency"])
    joined = keys.join(sf, [id_column, "wnid"], join_type="left outer")
    rows = joined.column("_row").to_numpy()
    frequency = np.zeros(len(ids))
    shown = np.zeros(len(ids), np.int64)
    frequency[rows] = joined.column("selection_frequency").fill_null(0.0).to_numpy()
    shown[rows] = joined.column("num_shown").fill_null(0).to_numpy()
    return frequency, shown


def _flag(ids: Sequence[str], members: Sequence[str], what: str) -> np.ndarray:
    known = set(ids)
    unknown = [m for m in members if m not in known]
    if unknown:
        raise ValueError(f"{what} names {len(unknown)} candidate(s) that are not in the pool, e.g. {', '.join(unknown[:3])}")
    members = set(members)
    if not members:
        return np.zeros(len(ids), bool)
    return np.fromiter((i in members for i in ids), bool, len(ids))


def _check_previous(previous: Revision, config: SamplingConfig, wnid_of: dict) -> None:
    if previous.config.rule != config.rule:
        raise ValueError(
            f"cannot chain a {config.rule} revision from {previous.output_filename}, a {previous.config.rule} revision; "
            f"start from a revision of the same rule"
        )
    per_class: dict[str, int] = {}
    for i, (cid, wnid) in enumerate(previous.image_filenames):
        if cid not in wnid_of:
            raise ValueError(f"previous revision {previous.output_filename}: image_filenames[{i}] {cid} is not a candidate of the pool")
        if wnid_of[cid] != wnid:
            raise ValueError(
                f"previous revision {previous.output_filename}: image_filenames[{i}] lists {cid} under {wnid}, "
                f"but the pool has it under {wnid_of[cid]}"
            )
        per_class[wnid] = per_class.get(wnid, 0) + 1
    over = {w: n for w, n in per_class.items() if n > config.per_class}
    if over:
        raise ValueError(f"previous revision {previous.output_filename} has more than {config.per_class} images in class(es) {', '.join(sorted(over))}")


def sample_revision(
    pool: Pool,
    selection_frequencies: pa.Table,
    config: SamplingConfig,
    *,
    output_filename: str,
    blacklist: Union[Sequence[str], Mapping[str, Optional[str]]] = (),
    near_duplicates: Optional[pa.Table] = None,
    near_duplicate_overrides: Sequence[str] = (),
    near_duplicate_review: Optional[pa.Table] = None,
    previous: Optional[Revision] = None,
    time_string: Optional[str] = None,
    username: Optional[str] = None,
) -> SampleOutput:
    """Sample a revision from ``pool`` with ``config``; deterministic for fixed inputs and seed.

    ``blacklist`` is a list of candidate ids or a mapping id → reason (the original pipeline's
    blacklist); the reasons go into the decisions table.
    """
    candidates = pool.candidates.sort_by("candidate_id")
    ids = candidates.column("candidate_id").to_pylist()
    wnids = candidates.column("wnid").to_pylist()
    sf, shown = _frequencies_for(selection_frequencies, candidates.column("candidate_id"), candidates.column("wnid"), "candidate_id")
    blacklisted = _flag(ids, blacklist, "the blacklist")
    near_duplicate = resolve_near_duplicates(
        ids, wnids, sf, shown, blacklisted, near_duplicates,
        search_engine_ids=candidates.column("id_search_engine").to_pylist(), overrides=near_duplicate_overrides,
    )
    finished = review_finished(ids, near_duplicate_review, config.near_duplicate_review_targets)
    in_previous = None
    if previous is not None:
        _check_previous(previous, config, dict(zip(ids, wnids)))
        in_previous = _flag(ids, [cid for cid, _ in previous.image_filenames], "the previous revision")

    # restrict to the classes sampled (near-duplicates above were resolved on the whole pool)
    class_wnids = np.asarray(config.class_wnids)
    keep, arrays = _restrict_to_classes(class_wnids, wnids, sf, shown, blacklisted, near_duplicate, finished, in_previous)
    rng = np.random.default_rng(config.seed)
    originals = _originals(pool, selection_frequencies, class_wnids)
    from pipeline.rebuild.selection_prior import posterior_inputs  # --match-on posterior: bin estimated true frequencies

    rule_arrays, rule_originals, prior = posterior_inputs(config, arrays, originals)
    result = _run_rule(config, rule_arrays, rule_originals, rng, class_wnids)

    kept_ids = np.asarray(ids, dtype=object)[keep]
    image_filenames = tuple((str(kept_ids[i]), str(class_wnids[arrays.class_index[i]])) for i in result.selected)
    revision = Revision(
        config=config,
        image_filenames=image_filenames,
        is_valid=result.is_valid,
        time_string=time_string or now_time_string(),
        username=username or current_username(),
        output_filename=output_filename,
        starting_from=previous.output_filename if previous is not None else None,
    )
    decisions = _decisions(kept_ids, class_wnids, arrays, result, blacklist if isinstance(blacklist, Mapping) else {})
    report = _report(revision, result, arrays, originals, class_wnids, near_duplicate, near_duplicates, near_duplicate_review, previous)
    if prior is not None:
        report["selection_prior"] = prior
    return SampleOutput(revision, report, decisions)


def _restrict_to_classes(class_wnids, wnids, sf, shown, blacklisted, near_duplicate, finished, in_previous):
    """The mask of the candidates of the sampled classes, and their arrays for the rules."""
    wnid_array = np.asarray(wnids)
    position = np.searchsorted(class_wnids, wnid_array).clip(0, len(class_wnids) - 1)
    keep = class_wnids[position] == wnid_array
    return keep, CandidateArrays(
        class_index=position[keep],
        selection_frequency=sf[keep],
        num_annotations=shown[keep],
        blacklisted=blacklisted[keep],
        near_duplicate=near_duplicate[keep],
        review_finished=None if finished is None else finished[keep],
        in_previous=None if in_previous is None else in_previous[keep],
    )


@dataclass(frozen=True)
class _Originals:
    class_index: np.ndarray
    selection_frequency: np.ndarray
    num_annotations: np.ndarray


def _originals(pool: Pool, selection_frequencies: pa.Table, class_wnids: np.ndarray) -> _Originals:
    originals = pool.originals
    sf, shown = _frequencies_for(selection_frequencies, originals.column("image_id"), originals.column("wnid"), "image_id")
    labels = np.asarray(originals.column("wnid").to_pylist(), dtype=str) if originals.num_rows else np.asarray([], str)
    position = np.searchsorted(class_wnids, labels).clip(0, len(class_wnids) - 1)
    keep = (class_wnids[position] == labels) & (shown > 0) if len(labels) else np.zeros(0, bool)
    return _Originals(position[keep], sf[keep], shown[keep])


def _run_rule(config: SamplingConfig, arrays: CandidateArrays, originals: _Originals, rng, class_wnids) -> SamplingResult:
    n_classes = len(class_wnids)
    names = list(class_wnids)
    if config.rule == "matched-frequency":
        targets, usable = matched_frequency_targets(
            originals.class_index, originals.selection_frequency, originals.num_annotations, n_classes,
            per_class=config.per_class, edges=config.histogram_bins,
            min_annotations_val=config.min_num_annotations_val, min_images_per_class=config.min_num_val_images_per_wnid,
        )
        result = sample_matched_frequency(
            arrays, targets, rng=rng, min_annotations=config.min_num_annotations_candidates,
            edges=config.histogram_bins, allow_upward_sampling=config.allow_upward_sampling, class_names=names,
        )
        too_few = usable < config.min_num_val_images_per_wnid
        if too_few.any():
            result.is_valid = False
            short = [names[i] for i in np.flatnonzero(too_few)]
            result.problems.insert(0, (
                f"{len(short)} class(es) have fewer than {config.min_num_val_images_per_wnid} originals with at least "
                f"{config.min_num_annotations_val} annotations, so no histogram to match: {', '.join(short[:10])}"
                f"{' ...' if len(short) > 10 else ''}"
            ))
            result.shortfall = np.where(usable == 0, config.per_class, result.shortfall)
        return result
    if config.rule == "threshold-0.7":
        thresholds = np.full(n_classes, config.selection_frequency_threshold)
        for wnid, value in config.wnid_thresholds.items():
            index = int(np.searchsorted(class_wnids, wnid))
            if index < n_classes and class_wnids[index] == wnid:
                thresholds[index] = value
        return sample_threshold(arrays, thresholds, rng=rng, per_class=config.per_class, min_annotations=config.min_num_annotations, class_names=names)
    return sample_top_images(arrays, n_classes, rng=rng, per_class=config.per_class, min_annotations=config.min_num_annotations, class_names=names)


def _decisions(kept_ids, class_wnids, arrays: CandidateArrays, result: SamplingResult, reasons: Mapping) -> pa.Table:
    names = np.asarray(("not_sampled",) + REASONS, dtype=object)
    decision = names[result.reason]
    selected = np.zeros(len(arrays), bool)
    selected[result.selected] = True
    decision[selected] = "selected"
    return pa.table(
        {
            "candidate_id": pa.array(list(kept_ids), pa.string()),
            "wnid": pa.array(class_wnids[arrays.class_index].tolist(), pa.string()),
            "num_annotations": pa.array(arrays.num_annotations, pa.int64()),
            "selection_frequency": pa.array(arrays.selection_frequency, pa.float64()),
            "bin": pa.array(result.bins, pa.int8()) if result.bins is not None else pa.nulls(len(arrays), pa.int8()),
            "decision": pa.array(decision.tolist(), pa.string()),
            "carried_over": pa.array(result.carried_over, pa.bool_()),
            "upward_to_bin": (
                pa.array(np.where(result.upward_to_bin >= 0, result.upward_to_bin, 0), pa.int8(), mask=result.upward_to_bin < 0)
                if result.upward_to_bin is not None else pa.nulls(len(arrays), pa.int8())
            ),
            "blacklist_reason": pa.array([reasons.get(c) if b else None for c, b in zip(kept_ids, arrays.blacklisted)], pa.string()),
        }
    )


def _report(revision, result, arrays, originals, class_wnids, near_duplicate, pairs, review, previous) -> dict:
    config = revision.config
    min_val = config.min_num_annotations_val if config.rule == "matched-frequency" else config.min_num_annotations
    usable = originals.num_annotations >= min_val
    chosen_sf = arrays.selection_frequency[result.selected]
    replaced = 0 if previous is None else len(previous.image_filenames) - int(np.count_nonzero(result.carried_over))
    report = {
        "revision": revision.output_filename,
        "rule": config.rule,
        "is_valid": result.is_valid,
        "problems": list(result.problems),
        "config": {k: v for k, v in revision.to_json().items() if k not in ("image_filenames", "is_valid")},
        "classes": len(class_wnids),
        "images": len(result.selected),
        "candidates": len(arrays),
        "exclusions": result.reason_counts(),
        "eligible": int(np.count_nonzero(result.reason == 0)),
        "not_sampled": int(np.count_nonzero(result.reason == 0)) - len(result.selected),
        "carried_over": int(np.count_nonzero(result.carried_over)),
        "replaced_from_previous": replaced,
        "upward_sampled": result.num_upward,
        "short_classes": {str(class_wnids[i]): int(result.shortfall[i]) for i in np.flatnonzero(result.shortfall)},
        "mean_selection_frequency": {
            "set": float(chosen_sf.mean()) if len(chosen_sf) else None,
            "originals": float(originals.selection_frequency[usable].mean()) if usable.any() else None,
        },
        "originals_used": int(np.count_nonzero(usable)),
        "near_duplicates": {
            "confirmed_pairs": 0 if pairs is None else pairs.num_rows,
            "candidates_flagged": int(np.count_nonzero(near_duplicate)),
            "review_table": review is not None,
        },
    }
    if result.targets is not None:
        report["target_histogram"] = result.targets.sum(axis=0).tolist()
        report["set_histogram"] = np.bincount(result.bins[result.selected], minlength=result.targets.shape[1]).tolist()
    return report


def sample_stage(
    pool: PathLike,
    output: PathLike,
    config: SamplingConfig,
    *,
    selection_frequencies: Optional[PathLike] = None,
    blacklist: Optional[PathLike] = None,
    near_duplicates: Optional[PathLike] = None,
    near_duplicate_overrides: Optional[PathLike] = None,
    near_duplicate_review: Optional[PathLike] = None,
    starting_from: Optional[PathLike] = None,
    review: Optional[PathLike] = None,
    time_string: Optional[str] = None,
    username: Optional[str] = None,
) -> SampleOutput:
    """The ``sample`` stage on files: read the inputs, sample, write the three outputs as one unit.

    The output paths are checked before any work; the decisions, report and revision are
    written to temporary names and renamed at the end, the revision last, so that they are
    either all the new run's or all the previous ones. The report records every input file's
    sha256, so that a regeneration can be checked to use the same inputs.
    """
    output = Path(output)
    if output.suffix != ".json":
        raise ValueError(f"the revision file must end in .json, got {output.name}")
    review_folder = read_review_folder(review) if review is not None else None
    if review_folder is not None and starting_from is None:
        starting_from = review_folder.revision_path  # chain from the revision that was reviewed
    inputs = _input_paths(pool, selection_frequencies, blacklist=blacklist, near_duplicates=near_duplicates,
                          near_duplicate_overrides=near_duplicate_overrides, near_duplicate_review=near_duplicate_review,
                          starting_from=starting_from)
    inputs.update(review_folder.input_files() if review_folder is not None else {})
    outputs = _checked_outputs(output, inputs)
    loaded = load_pool(pool, ("candidates", "originals"))
    sf_path = inputs["selection_frequencies"]
    if not sf_path.is_file():
        raise FileNotFoundError(f"{sf_path} does not exist; run `python -m pipeline selection-frequency {pool}` first")
    blacklisted = read_blacklist(blacklist) if blacklist is not None else {}
    pairs = read_near_duplicates(near_duplicates) if near_duplicates is not None else None
    if review_folder is not None:
        blacklisted, pairs = review_folder.merged(blacklisted, pairs)
    result = sample_revision(
        loaded, read_table(sf_path, "selection_frequencies"), config, output_filename=output.name,
        blacklist=blacklisted,
        near_duplicates=pairs,
        near_duplicate_overrides=read_id_list(near_duplicate_overrides) if near_duplicate_overrides is not None else (),
        near_duplicate_review=read_review(near_duplicate_review) if near_duplicate_review is not None else None,
        previous=load_revision(starting_from) if starting_from is not None else None,
        time_string=time_string, username=username,
    )
    result.report["inputs"] = {name: {"file": p.name, "sha256": file_digest(p).sha256} for name, p in inputs.items() if p.is_file()}
    if review_folder is not None:
        previous = load_revision(starting_from) if starting_from is not None else None
        result.report["review"] = review_folder.report(previous, result.revision, result.decisions)
    _write_outputs(result, outputs, inputs)
    return result


def _checked_outputs(output: Path, inputs: Mapping[str, Path]) -> list[Path]:
    """The decisions, report and revision paths, checked (before any work) to be writable by ``sample``."""
    revision_path, report_path, decisions_path = output_paths(output)
    outputs = [decisions_path, report_path, revision_path]  # the revision, which names the others, last
    for path in outputs:
        check_output_file(path, "sample", inputs=inputs.values())
    return outputs


def _write_outputs(result: SampleOutput, outputs: Sequence[Path], inputs: Mapping[str, Path]) -> None:
    with owned_files(outputs, "sample", inputs=inputs.values()) as (decisions_tmp, report_tmp, revision_tmp):
        write_table(result.decisions, decisions_tmp)
        report_tmp.write_text(json.dumps(result.report, indent=2) + "\n", encoding="utf-8")
        revision_tmp.write_text(result.revision.dumps(), encoding="utf-8")
    report = result.report
    logger.info("%s: %d images, valid=%s, exclusions %s, %d upward",
                outputs[-1].name, report["images"], report["is_valid"], report["exclusions"], report["upward_sampled"])


def _input_paths(pool: PathLike, selection_frequencies: Optional[PathLike], **optional: Optional[PathLike]) -> dict[str, Path]:
    """The input files of a run by name (the pool's tables, the selection frequencies, the given review files)."""
    sf_path = Path(selection_frequencies) if selection_frequencies is not None else Path(pool) / SELECTION_FREQUENCIES_NAME
    inputs = {"pool_candidates": Path(pool) / "candidates.parquet", "pool_originals": Path(pool) / "originals.parquet", "selection_frequencies": sf_path}
    inputs |= {name: Path(path) for name, path in optional.items() if path is not None}
    return inputs

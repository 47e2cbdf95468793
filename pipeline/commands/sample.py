"""``python -m pipeline sample``: sample a revision by one of the three rules."""

from __future__ import annotations

import argparse
import json

from imagenetv2.variants import CONFIG_NAMES

from ._errors import reporting_errors, require_extra

HELP = f"sample a revision ({', '.join(CONFIG_NAMES[:-1])} or {CONFIG_NAMES[-1]}) and write it with its report"

# option dest → SamplingConfig field, for the options that override a --config-from revision
OVERRIDES = {
    "rule": "rule",
    "seed": "seed",
    "per_class": "per_class",
    "histogram_bins": "histogram_bins",
    "min_annotations_candidates": "min_num_annotations_candidates",
    "min_annotations_val": "min_num_annotations_val",
    "min_val_images_per_class": "min_num_val_images_per_wnid",
    "upward_sampling": "allow_upward_sampling",
    "match_on": "match_on",
    "selection_prior": "selection_prior",
    "min_annotations": "min_num_annotations",
    "threshold": "selection_frequency_threshold",
    "wnid_thresholds": "wnid_thresholds",
    "review_targets": "near_duplicate_review_targets",
    "classes": "wnids",
}

OPTION_NAMES = {"wnid_thresholds": "wnid-threshold", "upward_sampling": "no-upward-sampling"}


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers like 0.2,0.4,0.6,0.8, got {text!r}") from None


def _named_floats(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER like n03804744=0.5, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pool", metavar="POOL", help="pool folder written by `ingest` (with selection frequencies)")
    parser.add_argument("--output", required=True, metavar="FILE.json", help="revision file to write; the report and decisions go beside it")
    parser.add_argument("--rule", choices=list(CONFIG_NAMES), help="sampling rule (required unless --config-from)")
    parser.add_argument("--seed", type=int, help="random seed (required unless --config-from)")
    parser.add_argument("--config-from", metavar="REVISION", help="take every setting from this revision file or released revision (imagenetv2-b-33, ...); "
                        "with no other setting given, its time_string and username too, so that it is regenerated bit for bit")
    parser.add_argument("--per-class", type=int, help="images per class (default 10)")
    parser.add_argument("--classes", metavar="FILE|WNID,...", help="class list file (JSON/YAML/text of ids: sample all its classes), or comma-separated ids to sample only those (default: the 1,000 ImageNet classes)")
    parser.add_argument("--wordnet", metavar="DIR", help="WordNet 3.0 database folder for a class list of bare WordNet ids outside ImageNet-1k")
    inputs = parser.add_argument_group("inputs besides the pool")
    inputs.add_argument("--selection-frequencies", metavar="FILE", help="default: POOL/selection_frequencies.parquet")
    inputs.add_argument("--blacklist", metavar="FILE", help="candidates removed by review: JSON {candidate_id: reason} (the original format; reasons go into the decisions), "
                        "JSON list, text file, or table with candidate_id")
    inputs.add_argument("--near-duplicates", metavar="FILE", help="confirmed near-duplicate pairs: image_id, duplicate_id (.csv/.parquet/.jsonl) or JSON {candidate: [duplicates]} "
                        "(candidates, or ImageNet train/val/test files)")
    inputs.add_argument("--near-duplicate-overrides", metavar="FILE", help="candidates to keep from their near-duplicate component (JSON list)")
    inputs.add_argument("--near-duplicate-review", metavar="FILE", help="review table: candidate_id, l2, fc7, dssim (how far neighbours were reviewed)")
    inputs.add_argument("--starting-from", metavar="REVISION", help="previous revision to chain from: its still-valid images are kept")
    inputs.add_argument("--review", metavar="REVIEW", help="folder written by `review`: its blacklist and confirmed near-duplicates are excluded, "
                        "and the revision it reviewed is the one chained from (unless --starting-from)")
    mf = parser.add_argument_group("matched-frequency")
    mf.add_argument("--histogram-bins", type=_floats, metavar="EDGES", help="bin edges (default 0.2,0.4,0.6,0.8)")
    mf.add_argument("--min-annotations-candidates", type=int, metavar="N", help="default 10")
    mf.add_argument("--min-annotations-val", type=int, metavar="N", help="annotations an original needs to count in its class's histogram (default 10)")
    mf.add_argument("--min-val-images-per-class", type=int, metavar="N", help="originals a class needs for a histogram (default 20)")
    mf.add_argument("--no-upward-sampling", dest="upward_sampling", action="store_const", const=False, help="a short bin makes the revision invalid instead of being filled from higher bins")
    mf.add_argument("--match-on", choices=["observed", "posterior"], help="bin observed selection frequencies (default, as released) or each image's "
                    "posterior mean under a prior fitted to the originals and to the candidates separately (docs/report.md)")
    mf.add_argument("--selection-prior", choices=["mixture", "beta-binomial"], help="the prior of --match-on posterior (default mixture)")
    other = parser.add_argument_group("threshold-0.7 and top-images")
    other.add_argument("--min-annotations", type=int, metavar="N", help="default 10")
    other.add_argument("--threshold", type=float, metavar="X", help="selection-frequency threshold (default 0.7)")
    other.add_argument("--wnid-threshold", dest="wnid_thresholds", type=_named_floats, action="append", metavar="WNID=X", help="a class's own threshold (repeatable), e.g. n03804744=0.5")
    parser.add_argument("--review-targets", type=lambda s: dict(_named_floats(p) for p in s.split(",")), metavar="l2=..,fc7=..,dssim=..",
                        help="near-duplicate review targets (default: the released l2=1.2e8, fc7=13200, dssim=0.2205)")


def config_from_args(args: argparse.Namespace):
    """The SamplingConfig, time_string and username that the options ask for."""
    import dataclasses

    from pipeline.rebuild.revision import SamplingConfig, load_revision

    overrides = {}
    for option, field in OVERRIDES.items():
        value = getattr(args, option, None)
        if value is not None:
            overrides[field] = dict(value) if option == "wnid_thresholds" else value
    if getattr(args, "classes", None) is not None:
        overrides["wnids"] = _class_ids(args.classes, getattr(args, "wordnet", None))
    if args.config_from:
        base = load_revision(args.config_from)
        if not overrides:
            return base.config, base.time_string, base.username, base.starting_from
        return _naming_options(lambda: dataclasses.replace(base.config, **overrides)), None, None, None
    missing = [o for o in ("rule", "seed") if getattr(args, o) is None]
    if missing:
        raise ValueError(f"give --{' and --'.join(missing)} (or --config-from a revision)")
    return _naming_options(lambda: SamplingConfig(**overrides)), None, None, None


def _class_ids(value: str, wordnet):
    """--classes: a class list FILE (all its classes; None for ImageNet-1k itself), or WNID,... of ImageNet-1k."""
    from pathlib import Path

    from pipeline.rebuild.classes import imagenet_1k, load_classes

    if Path(value).is_file():
        classes = load_classes(value, wordnet=wordnet)
        return None if classes.is_imagenet_1k else classes.wnids
    ids = tuple(w.strip() for w in value.split(",") if w.strip())
    imagenet_1k().check_ids(ids, "--classes")
    return ids


def _naming_options(make):
    """Build the config; a refused value's error names the option it came from."""
    try:
        return make()
    except ValueError as e:
        words = str(e).split(" ")[:3]
        for option, field in OVERRIDES.items():
            if field in words:
                raise ValueError(f"--{OPTION_NAMES.get(option, option.replace('_', '-'))}: {e}") from None
        raise


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        from pathlib import Path

        require_extra("pipeline", ["pyarrow"], "sample")
        from pipeline.rebuild.sample import sample_stage

        config, time_string, username, previous_name = config_from_args(args)
        if previous_name is not None and (args.starting_from is None or Path(args.starting_from).name != previous_name and Path(args.starting_from).stem != previous_name.removesuffix(".json")):
            raise ValueError(f"{args.config_from} was chained from {previous_name}; pass that revision with --starting-from to regenerate it")
        result = sample_stage(
            args.pool, args.output, config,
            selection_frequencies=args.selection_frequencies, blacklist=args.blacklist,
            near_duplicates=args.near_duplicates, near_duplicate_overrides=args.near_duplicate_overrides,
            near_duplicate_review=args.near_duplicate_review, starting_from=args.starting_from, review=args.review,
            time_string=time_string, username=username,
        )
        report = {k: v for k, v in result.report.items() if k not in ("config", "inputs")}
        print(json.dumps(report, indent=2))
        print(f"wrote {args.output}")
        return 0 if result.revision.is_valid else 3

    return reporting_errors(main)

"""``python -m pipeline report``: the paper's tables and figures from one or more evaluations."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors

HELP = "the paper's analysis of `evaluate` results: changes with intervals, ranks, Table 2, fits, effective robustness, figures"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  python -m pipeline report eval/results.json --output report/\n"
        "  python -m pipeline report eval-a/results.json eval-b/results.json --baseline 'resnet*' --output report/\n"
        "  python -m pipeline report eval/results.json --pool pool/ --output report/   # + accuracy by selection frequency\n"
        "\nSee docs/report.md for the files and their keys."
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS.json", help="results.json files written by `evaluate` (or their folders)")
    parser.add_argument("--output", required=True, metavar="DIR", help="folder to write report.json, report.md and figures/ into")
    fit = parser.add_argument_group("fits and effective robustness")
    fit.add_argument("--baseline", metavar="PATTERN", help="fit the lines to the models whose name matches this glob pattern (default: all)")
    fit.add_argument("--models", metavar="FILE", help="the model file given to `evaluate`: its records' `baseline: true` pick the baseline")
    fit.add_argument("--effective-robustness-scale", choices=("linear", "probit", "logit"), default="logit",
                     help="the fit whose line effective_robustness is measured from (default: %(default)s, as Taori et al. 2020)")
    fit.add_argument("--n-bootstrap", type=int, default=100_000, metavar="N", help="bootstrap resamples of the models (default: %(default)s)")
    fit.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    fit.add_argument("--confidence-level", type=float, default=0.95, metavar="X", help="of the change intervals (default: %(default)s)")
    sf = parser.add_argument_group("accuracy by selection frequency")
    sf.add_argument("--pool", metavar="POOL", help="the rebuilt sets' pool folder: its selection frequencies and each image's own class")
    sf.add_argument("--selection-frequencies", metavar="FILE",
                    help="a table (.parquet/.csv/.jsonl) with candidate_id or image_id and selection_frequency, one row per image "
                         "(default with --pool: POOL/selection_frequencies.parquet)")
    sf.add_argument("--cache-dir", help="datasets cache folder, to read the sets' image ids")
    parser.add_argument("--no-figures", action="store_true", help="write report.json and report.md only")


def baseline_from_model_file(path: str) -> set[str]:
    """The names of the model file's records marked ``baseline: true``."""
    from pipeline.evaluation.models import load_model_file

    records = load_model_file(path)
    marked = {r.name for r in records if r.baseline}
    if not marked:
        raise ValueError(f"model file {path!r} marks no record with `baseline: true`; mark the standard models, or drop --models")
    return marked


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        from pathlib import Path

        from pipeline.core.ownership import check_output_dir
        from pipeline.evaluation.report import load_results, write_report
        from pipeline.evaluation.selection_bins import selection_frequency_report_from_files

        from ._errors import require_extra

        require_extra("pipeline", ["matplotlib"] if not args.no_figures else [], "report")
        if args.baseline and args.models:
            raise ValueError("give --baseline PATTERN or --models FILE (with baseline fields), not both")
        if args.n_bootstrap < 0:
            raise ValueError(f"--n-bootstrap must be 0 or more, got {args.n_bootstrap}")
        inputs = [Path(p) for p in args.results]
        check_output_dir(args.output, "report", inputs=inputs)
        rows, folders = load_results(inputs)
        baseline = baseline_from_model_file(args.models) if args.models else args.baseline
        bins = None
        if args.pool or args.selection_frequencies:
            bins = selection_frequency_report_from_files(rows, folders, pool=args.pool, selection_frequencies=args.selection_frequencies,
                                                         cache_dir=args.cache_dir, confidence_level=args.confidence_level)
        document = write_report(
            args.output, rows, selection_bins=bins, figures=not args.no_figures, inputs=inputs, baseline=baseline,
            n_bootstrap=args.n_bootstrap, seed=args.seed, confidence_level=args.confidence_level,
            effective_robustness_scale=args.effective_robustness_scale,
        )
        from pipeline.evaluation.report_markdown import table2

        print("\n".join(table2(document)))
        print(f"wrote {Path(args.output) / 'report.md'}, {Path(args.output) / 'report.json'}"
              + (f" and figures in {Path(args.output) / 'figures'}/" if not args.no_figures else ""))
        return 0

    return reporting_errors(main)

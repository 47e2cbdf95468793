"""``python -m pipeline compare``: is model A really better than model B on the same images?"""

from __future__ import annotations

import argparse
import json

from ._errors import reporting_errors

HELP = "compare two models on the same images of a set: exact McNemar test and paired-difference interval"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS.json", help="results.json written by `evaluate` (or its folder), with its predictions/")
    parser.add_argument("--model", action="append", required=True, metavar="NAME", help="a model name as in results.json; give exactly two")
    parser.add_argument("--dataset", required=True, metavar="SET", help="the dataset as in results.json's dataset (or dataset_spec) column")
    parser.add_argument("--top", type=int, choices=(1, 5), default=1, help="compare top-1 (default) or top-5 correctness")
    parser.add_argument("--confidence-level", type=float, default=0.95, metavar="X", help="of the interval (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def format_comparison(model_a: str, model_b: str, dataset: str, result) -> str:
    """The comparison as a few lines of text (accuracies and differences in percent)."""
    level = f"{100 * result.confidence_level:g}%"
    return "\n".join([
        f"{model_a} (A) against {model_b} (B) on {dataset}, {result.total:,} images",
        f"  accuracy  A {100 * result.accuracy_a:.2f}%   B {100 * result.accuracy_b:.2f}%",
        f"  A - B     {100 * result.difference:+.2f} points, {level} interval "
        f"[{100 * result.difference_ci_low:+.2f}, {100 * result.difference_ci_high:+.2f}] ({result.interval})",
        f"  images    only A right {result.only_a_correct:,}   only B right {result.only_b_correct:,}   "
        f"both right {result.both_correct:,}   both wrong {result.both_wrong:,}",
        f"  exact McNemar test (two-sided binomial test of the {result.only_a_correct + result.only_b_correct:,} "
        f"discordant images): p = {result.mcnemar_p_value:.3g}",
    ])


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        from pipeline.evaluation.paired import compare_models

        if len(args.model) != 2:
            raise ValueError(f"give --model exactly twice (A and B); got {len(args.model)}: {args.model}")
        model_a, model_b = args.model
        result = compare_models(args.results, model_a, model_b, args.dataset, top=args.top, confidence_level=args.confidence_level)
        if args.json:
            print(json.dumps({"model_a": model_a, "model_b": model_b, "dataset": args.dataset, "top": args.top} | result.to_json(), indent=2))
        else:
            print(format_comparison(model_a, model_b, args.dataset, result))
        return 0

    return reporting_errors(main)

"""``python -m pipeline selection-frequency``: selection frequencies per (image, class) of a pool."""

from __future__ import annotations

import argparse
import json

from ._classes import add_class_arguments, class_list_from_args
from ._errors import reporting_errors, require_extra

HELP = "compute selection frequencies (submitted and approved assignments) for candidates and control images"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pool", metavar="POOL", help="pool folder written by `ingest`")
    parser.add_argument("--output", metavar="FILE", help="Parquet file to write (default: POOL/selection_frequencies.parquet; the report goes beside it as .json); "
                        "never one of the pool's own tables")
    parser.add_argument("--min-control-accuracy", type=float, metavar="X", help="drop workers whose accuracy on the control images is below X (0..1; default: keep everyone)")
    add_class_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["pyarrow"], "selection-frequency")
        from pipeline.rebuild.selection_frequency import selection_frequency_stage

        path, report = selection_frequency_stage(args.pool, args.output, min_control_accuracy=args.min_control_accuracy, classes=class_list_from_args(args))
        dropped = report["worker_filter"]["dropped"]
        summary = {k: v for k, v in report.items() if k != "worker_filter"}
        summary["dropped_workers"] = [w["worker_id"] for w in dropped]
        print(json.dumps(summary, indent=2))
        print(f"wrote {path}")
        return 0

    return reporting_errors(main)

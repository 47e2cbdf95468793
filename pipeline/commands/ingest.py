"""``python -m pipeline ingest``: candidate records, annotation results and images → a pool folder."""

from __future__ import annotations

import argparse
import json

from ._classes import add_class_arguments, class_list_from_args
from ._errors import reporting_errors, require_extra

HELP = "read candidate records, crowd annotation results (batch-results CSV or JSON) and images into a pool folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--candidates", required=True, metavar="FILE", help="candidate search records (.jsonl like candidates_in_final_sets.jsonl, .json, .csv, .parquet)")
    parser.add_argument("--originals", required=True, metavar="FILE", help="original validation images shown as controls: image_id, wnid (.csv, .json, .jsonl, .parquet)")
    parser.add_argument("--results", action="append", default=[], metavar="FILE", help="leave out for a pool before annotation (the input of `tasks`); batch-results CSV (HITId, AssignmentId, WorkerId, AssignmentStatus, Input.wnid, Input.images, Answer.selected; "
                        "ids as a JSON array or separated by , or |) or JSON list of assignments; repeatable")
    parser.add_argument("--images", metavar="DIR|FILE", help="the image store `download` wrote (failed downloads are left out), a folder of <candidate id>.jpeg files, or a .parquet table of candidate_id and image bytes (JPEG or PNG)")
    parser.add_argument("--output", required=True, metavar="DIR", help="the pool folder to write (a new folder, or a pool an earlier ingest wrote: replaced atomically)")
    parser.add_argument("--tasks", action="append", default=[], metavar="TASKS", help="folder written by `tasks` whose results these are: public image names are mapped back through its key.jsonl (Input.task_id, Answer.selected); repeatable for follow-up rounds")
    parser.add_argument("--strict", action="store_true", help="refuse a results file with no assignments (default: a warning)")
    add_class_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["pyarrow"], "ingest")
        from pipeline.rebuild.ingest import ingest

        report = ingest(args.output, candidates=args.candidates, originals=args.originals, results=args.results, images=args.images,
                        strict=args.strict, tasks=args.tasks, classes=class_list_from_args(args))
        print(json.dumps({k: v for k, v in report.items() if k not in ("inputs", "worker_control_accuracy")}, indent=2))
        print(f"wrote {args.output}")
        return 0

    return reporting_errors(main)

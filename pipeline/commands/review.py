"""``python -m pipeline review``: review a revision's images class by class in the browser, and confirm near-duplicates."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors, require_extra

HELP = "review a revision in the browser: blacklist images beside the originals of their class, confirm near-duplicates"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", required=True, metavar="POOL", help="pool folder written by `ingest`")
    parser.add_argument("--revision", required=True, metavar="REV.json", help="revision to review (written by `sample` from this pool)")
    parser.add_argument("--output", required=True, metavar="REVIEW", help="review folder: created, or resumed when it holds a review of the same revision")
    parser.add_argument("--near-duplicates", metavar="DIR", help="output folder of `near-duplicates` (its neighbours.parquet): enables the near-duplicate page")
    parser.add_argument("--originals", action="append", default=[], metavar="SOURCE",
                        help="original validation images: a folder of files named by image id, or a .parquet of image_id and image (repeatable)")
    parser.add_argument("--references", action="append", default=[], metavar="SOURCE",
                        help="other near-duplicate references (ImageNet train/test images), same forms as --originals (repeatable)")
    parser.add_argument("--starting-from", metavar="PREVIOUS_REVIEW", help="carry marks and class states over from the review of the previous revision")
    parser.add_argument("--classes", metavar="FILE", help="class list file (default: ImageNet-1k)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default localhost; any other requires the printed access token)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["starlette", "uvicorn"], "review")
        from pipeline.rebuild.local_server import access_token, check_port, serve
        from pipeline.rebuild.review.server import create_app
        from pipeline.rebuild.review.session import open_session

        check_port(args.host, args.port)
        session = open_session(
            args.pool, args.revision, args.output, originals=args.originals, references=args.references,
            near_duplicates=args.near_duplicates, starting_from=args.starting_from, classes=args.classes,
        )
        summary = session.state.class_summary()
        reviewed = sum(1 for s in summary.values() if s["reviewed"])
        print(f"reviewing {session.revision.output_filename}: {len(session.wnids)} classes ({reviewed} reviewed), "
              f"{len(session.revision.image_filenames)} images; saving to {args.output}", flush=True)
        serve(create_app(session), args.host, args.port, token=access_token(args.host), name="review", path="/class")
        return 0

    return reporting_errors(main)

"""``python -m pipeline build-set``: revisions + image store → release-layout tars and a Hub-ready folder."""

from __future__ import annotations

import argparse

from ._classes import add_class_arguments, class_list_from_args
from ._errors import reporting_errors, require_extra

HELP = "write the sets of revisions in the release layout (tar) and as a Hub-ready dataset folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("revisions", nargs="+", metavar="REVISION", help="revision files made by `sample` (one per rule; the rule names the config)")
    parser.add_argument("--pool", required=True, metavar="DIR", help="the pool folder whose image store holds the images")
    parser.add_argument("--output", required=True, metavar="DIR", help="folder to write: archives/, hub/, build-set.json (a new folder, or one an earlier build-set wrote: replaced atomically)")
    parser.add_argument("--allow-invalid", action="store_true", help="build revisions marked is_valid: false too")
    add_class_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["pyarrow"], "build-set")
        from pipeline.rebuild.build_set import build_set

        for built in build_set(args.pool, args.revisions, args.output, allow_invalid=args.allow_invalid, classes=class_list_from_args(args)):
            print(f"{built.config}: {built.images} images from {built.revision}; {built.archive.name} {built.archive.size} bytes sha256 {built.archive.sha256}")
        print(f"wrote {args.output} (Hub-ready folder: {args.output}/hub)")
        return 0

    return reporting_errors(main)

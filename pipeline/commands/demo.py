"""``python -m pipeline demo``: a whole rebuild, offline, on a synthetic pool."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors, require_extra

HELP = "run a whole rebuild offline on a synthetic pool: annotations to revisions, sets, Hub folder and evaluation (about 20 s)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", default="demo-output", metavar="DIR", help="folder to write (default: %(default)s; replaced if it is a previous demo output)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic pool and the sampling (default: %(default)s)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    def main() -> int:
        require_extra("pipeline", ["pyarrow", "matplotlib", "tqdm"], "demo")  # before any step: the plot is the last one
        from pipeline.toys.demo import run_demo

        run_demo(args.output, seed=args.seed, show_progress=not args.no_progress)
        return 0

    return reporting_errors(main)

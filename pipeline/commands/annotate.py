"""``python -m pipeline annotate``: serve a tasks folder to lab annotators; answers in the batch-results CSV shape."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors, require_extra

HELP = "serve the annotation tasks as a local web page (a name, then one task after another); answers go to a batch-results CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tasks", metavar="TASKS", help="folder written by `python -m pipeline tasks` (with its upload/ images)")
    parser.add_argument("--output", metavar="FILE", help="results CSV to write and continue (default: TASKS-local-results.csv beside the folder)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; any other address requires the access token printed at start)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["starlette", "uvicorn"], "annotate")
        from pipeline.rebuild.annotate import run_annotation_server

        run_annotation_server(args.tasks, output=args.output, host=args.host, port=args.port)
        return 0

    return reporting_errors(main)

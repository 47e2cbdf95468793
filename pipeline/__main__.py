"""``python -m pipeline <command>``: every stage of a rebuild, publishing, and evaluation.

Each command lives in ``pipeline/commands/<name>.py`` and provides ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import their heavy
dependencies inside ``run`` so that ``--help`` and the light commands start fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Optional, Sequence

# command name -> module under pipeline.commands, in the order a rebuild runs
COMMANDS = {
    "ingest": "ingest",
    "selection-frequency": "selection_frequency",
    "sample": "sample",
    "build-set": "build_set",
    "simulate": "simulate",
    "demo": "demo",
    "push": "push",
    "push-metric": "push_metric",
    "evaluate": "evaluate",
}


def _load(module: str):
    return importlib.import_module(f"pipeline.commands.{module}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline", description="Every stage of a rebuild of the test sets, publishing, and evaluation."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = _load(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

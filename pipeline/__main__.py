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
    "search": "search",
    "download": "download",
    "tasks": "tasks",
    "mturk": "mturk",
    "annotate": "annotate",
    "ingest": "ingest",
    "selection-frequency": "selection_frequency",
    "near-duplicates": "near_duplicates",
    "sample": "sample",
    "review": "review",
    "build-set": "build_set",
    "simulate": "simulate",
    "demo": "demo",
    "push": "push",
    "push-metric": "push_metric",
    "evaluate": "evaluate",
    "report": "report",
    "compare": "compare",
}


def _load(module: str):
    return importlib.import_module(f"pipeline.commands.{module}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline", description="Every stage of a rebuild of the test sets, publishing, and evaluation."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = _load(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        if not {"-v", "--verbose"} & set(command._option_string_actions):  # -v after the command, too
            command.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        command.set_defaults(_run=module.run)
    return parser


VERBOSE_HELP = "show the stages' progress messages (-vv: debug messages too); by default only warnings and results"
OUR_LOGGERS = ("pipeline", "imagenetv2", "cifar10_1", "metrics")


class ProgressSafeHandler(logging.StreamHandler):
    """Writes log lines through ``tqdm.write``, so that a line never lands inside a progress bar's line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging must not fail the command
            self.handleError(record)


def configure_logging(verbosity: int) -> None:
    """Quiet by default (warnings and errors); ``-v``: our INFO messages; ``-vv``: our DEBUG messages."""
    handler = ProgressSafeHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ProgressSafeHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    if verbosity > 0:  # otherwise the root logger's default level (WARNING) keeps INFO lines out
        for name in OUR_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

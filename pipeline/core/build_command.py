"""``python -m imagenetv2 build`` and ``python -m cifar10_1 build``: the shared command.

Builds the package's configs and writes the Hub-ready folder in one pass (the archive is read,
checked and written into the Parquet shards as it streams). Every failure ends with one line
``error: ...`` on stderr and a non-zero exit: a bad or missing input, a failed download (what,
from where, and how to build from a downloaded file), a full disk, Ctrl-C (exit 130). The
temporary folder is removed then, and the previous output, if any, is left as it was.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional, Sequence

from pipeline.core.builders import CacheFullError, default_num_proc, is_disk_full
from pipeline.core.export import DatasetPackage, export_package


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--num-proc must be a whole number of processes >= 1, got {text!r}")
    return value


def build_parser(package: DatasetPackage) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=package.prog, description=f"Build and export {package.prog.split()[-1]}.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and debug messages")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build configs and write a Hub-ready folder (Parquet + dataset card)")
    build.add_argument(
        "--config", action="append", dest="configs", metavar="NAME",
        help=f"config to build (repeatable; default: all of {', '.join(package.config_names)})",
    )
    build.add_argument("--data-dir", help="folder holding the released files (default: download them)")
    build.add_argument("--output", default=package.default_output, help="folder to write (default: %(default)s)")
    build.add_argument("--cache-dir", help="datasets cache folder, for downloads (default: the datasets default)")
    build.add_argument("--no-verify", action="store_true", help="skip size and sha256 checks of the released files")
    build.add_argument(
        "--num-proc", type=_positive_int, default=default_num_proc(),
        help="processes that decode images when no pinned checksum covers them (default: this machine's cores, %(default)s)",
    )
    build.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="same as -v before build")
    return parser


def describe_error(error: BaseException) -> str:
    """The one line printed for ``error``."""
    if is_disk_full(error) and not isinstance(error, CacheFullError):
        where = f" while writing {error.filename}" if getattr(error, "filename", None) else ""
        return (
            f"no space left on the device{where} ({os.strerror(error.errno)}); nothing was written and the "
            f"temporary folder was removed: free some space or pass another --output"
        )
    return str(error) or type(error).__name__


def main(package: DatasetPackage, argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m <dataset>``."""
    args = build_parser(package).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        path = export_package(
            package, args.output, args.configs, data_dir=args.data_dir, cache_dir=args.cache_dir,
            verify=not args.no_verify, num_proc=args.num_proc,
        )
    except KeyboardInterrupt:
        print(f"interrupted: {args.output} was not written (the temporary folder was removed)", file=sys.stderr, flush=True)
        return 130
    except (ValueError, FileNotFoundError, OSError) as e:  # ConnectionError (a failed download) is an OSError
        print(f"error: {describe_error(e)}", file=sys.stderr, flush=True)
        return 1
    print(f"wrote {path}")
    return 0

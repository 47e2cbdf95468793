"""``python -m cifar10_1 build [--config NAME]... [--data-dir DIR] [--output DIR] [--no-verify]``."""

import sys

from pipeline.core.build_command import main

from . import PACKAGE

if __name__ == "__main__":
    sys.exit(main(PACKAGE))

"""``python -m imagenetv2 build``: build the ImageNetV2 configs and write a Hub-ready folder."""

import sys

from pipeline.core.build_command import main

from . import PACKAGE

if __name__ == "__main__":
    sys.exit(main(PACKAGE))

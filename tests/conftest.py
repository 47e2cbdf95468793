"""Shared fixtures: synthetic sets in the real release formats (see the fixtures_* modules)."""

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from fixtures_imagenetv2 import *  # noqa: E402,F401,F403
from fixtures_cifar10_1 import *  # noqa: E402,F401,F403

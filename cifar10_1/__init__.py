"""CIFAR-10.1 as a Hugging Face dataset: builder, card and export of the v6 and v4 test sets.

>>> from cifar10_1 import CLASS_NAMES, PACKAGE
>>> CLASS_NAMES[8], PACKAGE.default_config, list(PACKAGE.config_names)
('ship', 'v6', ['v6', 'v4'])
"""

from pipeline.core.export import DatasetPackage

from . import card
from .builder import Cifar10_1, Cifar10_1Config
from .features import cifar10_1_features
from .variants import CLASS_NAMES, CONFIG_NAMES, DEFAULT_CONFIG, VARIANTS, get_variant

# What `python -m cifar10_1 build` (pipeline.core.export.main) needs to know.
PACKAGE = DatasetPackage(
    prog="python -m cifar10_1",
    builder_cls=Cifar10_1,
    config_names=CONFIG_NAMES,
    default_config=DEFAULT_CONFIG,
    default_output="hub/cifar10_1",
    card_extra=card.card_extra,
    card_body=card.card_body,
    extra_files=card.extra_files,
)

__all__ = [
    "CLASS_NAMES",
    "CONFIG_NAMES",
    "DEFAULT_CONFIG",
    "PACKAGE",
    "VARIANTS",
    "Cifar10_1",
    "Cifar10_1Config",
    "cifar10_1_features",
    "get_variant",
]

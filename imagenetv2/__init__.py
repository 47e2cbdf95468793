"""ImageNetV2 as a Hugging Face dataset: builder, card and export of the three test sets.

>>> from imagenetv2 import ImageNetV2, CONFIG_NAMES
>>> CONFIG_NAMES
('matched-frequency', 'threshold-0.7', 'top-images')
"""

from pipeline.core.export import DatasetPackage

from .builder import ImageNetV2, ImageNetV2Config
from .card import card_body, card_extra, revision_files
from .variants import CONFIG_NAMES, DEFAULT_CONFIG, VARIANTS, get_variant

PACKAGE = DatasetPackage(
    prog="python -m imagenetv2",
    builder_cls=ImageNetV2,
    config_names=CONFIG_NAMES,
    default_config=DEFAULT_CONFIG,
    default_output="hub/imagenetv2",
    card_extra=card_extra,
    card_body=card_body,
    extra_files=revision_files,
)

__all__ = ["CONFIG_NAMES", "DEFAULT_CONFIG", "PACKAGE", "VARIANTS", "ImageNetV2", "ImageNetV2Config", "get_variant"]

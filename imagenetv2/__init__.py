"""ImageNetV2 as a Hugging Face dataset: builder, card and export of the three test sets.

Importing the package (or ``imagenetv2.classes``, ``imagenetv2.variants``) is cheap: ``datasets``
is imported only when the builder (``ImageNetV2``) or the export description (``PACKAGE``) is
first used.

>>> from imagenetv2 import ImageNetV2, CONFIG_NAMES
>>> CONFIG_NAMES
('matched-frequency', 'threshold-0.7', 'top-images')
"""

from __future__ import annotations

from pipeline.core.lazy import lazy_attributes

from .variants import CONFIG_NAMES, DEFAULT_CONFIG, VARIANTS, get_variant

_LAZY = {"ImageNetV2": "builder", "ImageNetV2Config": "builder"}


def _package():
    from pipeline.core.export import DatasetPackage

    from .builder import ImageNetV2
    from .card import card_body, card_extra, extra_files

    return DatasetPackage(
        prog="python -m imagenetv2",
        builder_cls=ImageNetV2,
        config_names=CONFIG_NAMES,
        default_config=DEFAULT_CONFIG,
        default_output="hub/imagenetv2",
        card_extra=card_extra,
        card_body=card_body,
        extra_files=extra_files,
    )


__all__ = ["CONFIG_NAMES", "DEFAULT_CONFIG", "PACKAGE", "VARIANTS", "ImageNetV2", "ImageNetV2Config", "get_variant"]


__getattr__ = lazy_attributes(__name__, _LAZY, {"PACKAGE": _package}, globals())

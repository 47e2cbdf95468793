"""ImageNetV2 as a Hugging Face dataset: builder, card and export of the three test sets."""

from .variants import CONFIG_NAMES, DEFAULT_CONFIG, VARIANTS, get_variant

__all__ = ["CONFIG_NAMES", "DEFAULT_CONFIG", "VARIANTS", "get_variant"]

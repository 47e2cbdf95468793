"""The eval extra: what ``evaluate`` needs beyond the core install, checked before it starts."""

from __future__ import annotations

import importlib.util

EVAL_MODULES = ("torch", "torchvision", "timm", "transformers", "matplotlib")
INSTALL = 'pip install -e ".[eval]"'


def missing_eval_modules() -> list[str]:
    """The modules of the eval extra that cannot be imported here.

    >>> isinstance(missing_eval_modules(), list)
    True
    """
    missing = []
    for name in EVAL_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def require_eval_extra() -> None:
    """Raise a ValueError naming the missing modules and the install command, if any is missing."""
    missing = missing_eval_modules()
    if missing:
        raise ValueError(
            f"`pipeline evaluate` needs the eval extra, and {', '.join(missing)} cannot be imported; "
            f"install it with {INSTALL} (or pip install \"imagenetv2-hf[eval]\")"
        )

"""How the rebuild commands report errors: one line naming the problem, exit status 1.

Also the check a command makes before any work that the extra it needs is installed
(:func:`require_extra`), so that a missing ``matplotlib`` is said at the start, with the
``pip install`` that brings it, instead of after every step has run.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Callable, Sequence

class MissingExtra(ImportError):
    """A command needs an optional dependency that is not installed; the message says which extra brings it."""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, modules: Sequence[str], command: str) -> None:
    """Raise :class:`MissingExtra` naming ``pip install -e ".[extra]"`` if one of ``modules`` is missing.

    >>> require_extra("pipeline", ["pyarrow"], "ingest")
    >>> require_extra("pipeline", ["no_such_module_here"], "demo")
    Traceback (most recent call last):
    ...
    pipeline.commands._errors.MissingExtra: `python -m pipeline demo` needs no_such_module_here, which is not installed; install the pipeline extra: pip install -e ".[pipeline]" (or pip install "imagenetv2-hf[pipeline]")
    """
    missing = [m for m in modules if not _importable(m)]
    if missing:
        raise MissingExtra(
            f"`python -m pipeline {command}` needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
            f'not installed; install the {extra} extra: pip install -e ".[{extra}]" (or pip install "imagenetv2-hf[{extra}]")'
        )


def reporting_errors(function: Callable[[], int]) -> int:
    """Run ``function``; print a bad input's error (ValueError, FileNotFoundError, OSError, a missing extra) and return 1."""
    try:
        return function()
    except (ValueError, FileNotFoundError, OSError, MissingExtra) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1

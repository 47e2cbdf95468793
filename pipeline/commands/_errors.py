"""How the rebuild commands report errors: one line naming the problem, exit status 1."""

from __future__ import annotations

import sys
from typing import Callable


def reporting_errors(function: Callable[[], int]) -> int:
    """Run ``function``; print a bad input's error (ValueError, FileNotFoundError, OSError) and return 1."""
    try:
        return function()
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1

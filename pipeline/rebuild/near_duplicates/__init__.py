"""The near-duplicate search stage: nearest neighbours of every candidate under l2, fc7 and DSSIM.

Modules: :mod:`.collections` (what an image collection is and how its ids are made),
:mod:`.features` (decoding, the feature cache on disk), :mod:`.ssim` (SSIM as scikit-image
computes it), :mod:`.search` (exact chunked top-k with FAISS, torch on a GPU, Ray shards),
:mod:`.dssim_search` (DSSIM over the class-restricted sets), :mod:`.review_status` (reviewed pairs
and thresholds), :mod:`.stage` (the stage). Imports the shared data models only, no other stage.
"""

from .review_status import SCALES, THRESHOLDS, read_reviews, review_status
from .stage import (
    COMMAND,
    METRICS,
    NearDuplicateResult,
    SearchConfig,
    near_duplicate_search,
)

__all__ = ["COMMAND", "METRICS", "SCALES", "THRESHOLDS", "NearDuplicateResult", "SearchConfig", "near_duplicate_search", "read_reviews", "review_status"]
